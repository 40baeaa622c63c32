"""``/v1/jobs``: the tenant's recent jobs; status (optionally held until the job ends), progress, failures, usage;
cooperative cancel."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Path, Query, Response
from fastapi.concurrency import run_in_threadpool

from api_gateway.deps import GatewayDep, TenantDep
from api_gateway.errors import not_found
from api_gateway.routes.common import RETRY_AFTER_S, WaitSeconds, errors, wait_until_finished
from api_gateway.schemas import CancelOut, JobListOut, JobOut
from shared.infra.jobs.store import TERMINAL, JobStore
from shared.infra.redis.conn import to_str
from shared.infra.redis.keys import Keys
from shared.public_json import cancel_json, job_json

router = APIRouter(prefix="/v1/jobs", tags=["jobs"])
SCAN_JOBS = 1000  # a kind filter looks at this many of the most recent jobs
JobKind = Literal["ingest", "delete", "recluster", "query"]
JobStatus = Literal["queued", "running", "succeeded", "failed", "canceled"]
JobId = Annotated[str, Path(min_length=1, max_length=200, examples=["job-5d0c6f0e9d8a4f7c9a8b7c6d5e4f3a2b"])]


def job_out(view: dict) -> JobOut:
    return JobOut(**job_json(view))


def set_retry_after(response: Response, view: dict) -> None:
    if view["status"] not in TERMINAL:
        response.headers["Retry-After"] = str(RETRY_AFTER_S.get(view.get("kind", ""), 2))


@router.get("", response_model=JobListOut, responses=errors(401, 422, 429), summary="Recent jobs")
def list_jobs(gw: GatewayDep, who: TenantDep, offset: Annotated[int, Query(ge=0, le=SCAN_JOBS)] = 0,
              limit: Annotated[int, Query(ge=1, le=100)] = 50,
              status: Annotated[JobStatus | None, Query()] = None,
              kind: Annotated[list[JobKind] | None, Query(max_length=4)] = None) -> JobListOut:
    """The tenant's jobs, newest first. ``kind`` (repeatable) and ``status`` filter them (among the 1000 most
    recent jobs); ``total`` counts the jobs that match."""
    k = Keys(who.tenant)
    if kind or status:  # one round trip for kinds and statuses, then views of the page only
        ids = [to_str(i) for i in gw.redis.zrevrange(k.jobs(), 0, SCAN_JOBS - 1)]
        pipe = gw.redis.pipeline(transaction=False)
        for job_id in ids:
            pipe.hmget(k.job(job_id), ["kind", "status"])
        rows = zip(ids, pipe.execute(), strict=True)
        ids = [i for i, (kd, st) in rows if kd is not None and (not kind or to_str(kd) in kind)
               and (status is None or to_str(st) == status)]
        total, page = len(ids), ids[offset:offset + limit]
    else:
        total = gw.redis.zcard(k.jobs())
        page = [to_str(i) for i in gw.redis.zrevrange(k.jobs(), offset, offset + limit - 1)]
    jobs = JobStore(gw.redis, who.tenant)
    items = [job_out(v) for v in (jobs.view(job_id) for job_id in page) if v is not None]
    return JobListOut(items=items, total=total, offset=offset, limit=limit)


@router.get("/{job_id}", response_model=JobOut, responses=errors(401, 404, 429), summary="Job status")
async def get_job(gw: GatewayDep, who: TenantDep, job_id: JobId, response: Response, wait: WaitSeconds = 0) -> JobOut:
    """Status (queued, running, succeeded, failed, canceled), progress, per-chunk failures, usage so far,
    timestamps; ``Retry-After`` while the job has not finished. With ``?wait``, a job that has not finished is held
    until it does (woken by its end, not polled) or the seconds pass, then shown as it is."""
    jobs = JobStore(gw.redis, who.tenant)
    view = await run_in_threadpool(jobs.view, job_id)
    if view is None:
        raise not_found("job")
    if wait > 0 and view["status"] not in TERMINAL:
        await wait_until_finished(gw, who.tenant, job_id, wait)
        view = await run_in_threadpool(jobs.view, job_id) or view
    set_retry_after(response, view)
    return job_out(view)


@router.post("/{job_id}/cancel", response_model=CancelOut, responses=errors(401, 404, 429), summary="Cancel a job")
def cancel_job(gw: GatewayDep, who: TenantDep, job_id: JobId) -> CancelOut:
    """Stops further work cooperatively (workers check between LLM calls); reports what was completed."""
    jobs = JobStore(gw.redis, who.tenant)
    if not jobs.exists(job_id):
        raise not_found("job")
    stage = jobs.get_field(job_id, "stage")
    canceled = jobs.cancel(job_id)
    return CancelOut(**cancel_json(job_id, canceled, jobs.view(job_id), stage))
