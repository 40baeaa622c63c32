"""Job state in Redis: status, stage, progress counters, per-chunk failures, planned batches, usage, timestamps.

The stages, their fields and claims are declared in ``shared.pipeline.flow``; this store only keeps them.
Who wants to hear about jobs (metrics) registers a :class:`JobListener`.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any, Protocol

from shared.domain.models import ChunkFailure
from shared.infra.jobs.bookkeeping import ENDED_COUNTS, expire_bookkeeping
from shared.infra.jobs.document_progress import DocumentProgress
from shared.infra.jobs.llm_wait import LLMWait, waiting_view
from shared.infra.jobs.lua_scripts import ADMIT, FINISH, MARK_RUNNING, MISSING, Admission
from shared.infra.redis.conn import to_str
from shared.infra.redis.keys import SEP, Keys, active_jobs_key
from shared.infra.tenancy.quotas import job_member
from shared.infra.tenancy.tiers import TIERS
from shared.infra.tenancy.usage import job_usage, parse_job_usage

TERMINAL = {"succeeded", "failed", "canceled"}


@dataclass
class JobSnapshot:
    """A job's state as stored: the job hash fields, fan-in sets, stage claims and batch progress."""

    tenant: str
    job_id: str
    fields: dict[str, str]
    docs: set[str] = field(default_factory=set)
    docs_done: set[str] = field(default_factory=set)
    docs_files: set[str] = field(default_factory=set)  # uploaded as files (PDF, HTML, DOCX): to be parsed
    docs_parsed: set[str] = field(default_factory=set)  # text extracted from the uploaded file (or failed to be)
    chunks: set[str] = field(default_factory=set)
    chunks_done: set[str] = field(default_factory=set)
    flags: dict[str, str] = field(default_factory=dict)  # stage -> token of the task that claimed it
    batches_done: dict[str, set[int]] = field(default_factory=dict)  # "merge" / "report{i}" / "map" -> batch indexes

    @property
    def kind(self) -> str:
        return self.fields.get("kind", "")

    @property
    def status(self) -> str:
        return self.fields.get("status", "")


_CANCEL_SEEN: dict[tuple[str, str], tuple[float, bool]] = {}


class JobListener(Protocol):
    """Told when a job is submitted or ends and when a chunk finishes
    (``shared.infra.observability.job_metrics.JobMetrics``)."""

    def job_submitted(self, kind: str, tier: str) -> None: ...

    def job_finished(self, kind: str, status: str, seconds: float | None, tier: str) -> None: ...

    def chunks_finished(self, count: int, outcome: str) -> None: ...


DELIVERY_TTL_S = 7 * 24 * 3600  # a job's delivery counts (``admit``) are kept a week after its last delivery
_listeners: list[JobListener] = []


def add_job_listener(listener: JobListener) -> None:
    """Register ``listener`` for this process (once: a listener already registered is not added again)."""
    if not any(existing is listener or type(existing) is type(listener) for existing in _listeners):
        _listeners.append(listener)


def active_member(tenant: str, job_id: str) -> str:
    """Member of the global active-jobs index (ids only, no tenant data): ``tenant<SEP>job_id``."""
    return f"{tenant}{SEP}{job_id}"


def parse_active_member(member) -> tuple[str, str]:
    tenant, _, job_id = to_str(member).partition(SEP)
    return tenant, job_id


class JobStore(DocumentProgress, LLMWait):
    def __init__(self, redis, tenant: str):
        self.redis, self.tenant, self.k = redis, tenant, Keys(tenant)

    def create(self, job_id: str, kind: str, doc_ids: list[str] | None = None, params: dict | None = None,
               files: list[str] | None = None, refused: list[dict] | None = None) -> None:
        """``files``: documents whose file is to be parsed first; ``refused``: the batch's documents refused by
        validation (``ingest_submit.Refusal.body()``), listed among the job's failures."""
        now = time.time()
        # the global index of jobs in flight first (another slot): a job listed without a record is dropped
        self.redis.zadd(active_jobs_key(), {active_member(self.tenant, job_id): now})
        pipe = self.redis.pipeline(transaction=True)
        pipe.hset(self.k.job(job_id), mapping={
            "id": job_id, "tenant": self.tenant, "kind": kind, "status": "queued", "stage": "queued",
            "created_at": now, "updated_at": now, "params": json.dumps(params or {}),
            "documents": len(doc_ids or []), **({"refused": json.dumps(refused)} if refused else {}),
        })
        if doc_ids:
            pipe.sadd(self.k.job_docs(job_id), *doc_ids)
        if files:
            pipe.sadd(self.k.job_docs_files(job_id), *files)
        pipe.zadd(self.k.jobs(), {job_id: now})
        pipe.execute()
        if _listeners:
            tier = self.tier()
            for listener in _listeners:
                listener.job_submitted(kind, tier)

    def exists(self, job_id: str) -> bool:
        return bool(self.redis.exists(self.k.job(job_id)))

    def get_field(self, job_id: str, field: str) -> str | None:
        v = self.redis.hget(self.k.job(job_id), field)
        return to_str(v) if v is not None else None

    def set(self, job_id: str, **fields) -> None:
        fields["updated_at"] = time.time()
        self.redis.hset(self.k.job(job_id), mapping={k: v if not isinstance(v, dict | list) else json.dumps(v)
                                                     for k, v in fields.items()})

    def mark_running(self, job_id: str, stage: str) -> bool:
        """Move to running/stage unless the job already ended (e.g. canceled); first start times of the
        job and of the stage are kept. One round trip (every task calls this). False when the job has
        ended (canceled, failed, succeeded) or does not exist."""
        key = self.k.job(job_id)
        return bool(self.redis.eval(MARK_RUNNING, 2, key, self.k.job_stages(job_id), stage, time.time()))

    def admit(self, job_id: str, task: str, item: str, max_deliveries: int, guard: str | None = None,
              mark: str | None = None, read: tuple[str, ...] = ()) -> Admission:
        """Deliveries of (``task``, ``item``) so far, whether the task may run and, if it may, the job's fields
        ``read`` (None when unset): the count, the ``guard``, the ``mark`` and the read in one round trip
        (``jobs.lua_scripts.ADMIT`` says each); every task calls it (``workers/shell``)."""
        count, admitted, *values = self.redis.eval(
            ADMIT, 3, self.k.deliveries(job_id), self.k.job(job_id), self.k.job_stages(job_id), f"{task}:{item}",
            DELIVERY_TTL_S, max_deliveries, guard or "", mark or "", time.time(), *read)
        fields = {f: to_str(v) if v is not None else None for f, v in zip(read, values, strict=False)} if values else {}
        return Admission(int(count), bool(int(admitted)), fields)

    def canceled_recently(self, job_id: str, max_age_s: float = 0.5) -> bool:
        """``is_canceled`` read at most every ``max_age_s`` per job and process (a cancel is final):
        the check before every LLM call, cooperative cancel within half a second."""
        now = time.monotonic()
        key = (self.tenant, job_id)
        hit = _CANCEL_SEEN.get(key)
        if hit is not None and (hit[1] or now - hit[0] < max_age_s):
            return hit[1]
        canceled = self.is_canceled(job_id)
        if len(_CANCEL_SEEN) > 10_000:
            _CANCEL_SEEN.clear()
        _CANCEL_SEEN[key] = (now, canceled)
        return canceled

    def mark_stage_time(self, job_id: str, stage: str) -> None:
        self.redis.hsetnx(self.k.job_stages(job_id), stage, time.time())

    def stage_times(self, job_id: str) -> dict[str, float]:
        """When each stage first started (seconds since the job was created)."""
        created = float(self.get_field(job_id, "created_at") or 0)
        raw = self.redis.hgetall(self.k.job_stages(job_id))
        return dict(sorted(((to_str(k), round(float(v) - created, 3)) for k, v in raw.items()), key=lambda kv: kv[1]))

    def status(self, job_id: str) -> str | None:
        return self.get_field(job_id, "status")

    def is_canceled(self, job_id: str) -> bool:
        return self.status(job_id) == "canceled"

    def finish(self, job_id: str, status: str, **fields) -> bool:
        """End the job with ``status`` and ``fields`` unless it already ended; True when this call ended it."""
        return self._end(job_id, status, stage="done", **fields)

    def cancel(self, job_id: str) -> bool:
        return self._end(job_id, "canceled", stage="canceled")

    def tier(self) -> str:
        return TIERS.tier(self.redis, self.tenant)

    def _end(self, job_id: str, status: str, **fields) -> bool:
        """The final fields, the publish that wakes its waiters, the metrics claim and the tenant's freed quota slot
        in one script (``FINISH``); then the job leaves the global active set (no tenant's key: another slot) and
        its metrics are recorded, once per job even when two tasks (or a redelivery) end it concurrently."""
        now = time.time()
        fields = {"status": status, **fields, "finished_at": now, "updated_at": now}
        args = [x for k, v in fields.items() for x in (k, json.dumps(v) if isinstance(v, dict | list) else v)]
        ended = self.redis.eval(FINISH, 3, self.k.job(job_id), self.k.job_flags(job_id), self.k.quota_active(),
                                self.k.job_done_channel(job_id), status, "1" if _listeners else "0",
                                job_member(job_id), *args)
        if not ended or not int(ended[0]):
            return False
        self.redis.zrem(active_jobs_key(), active_member(self.tenant, job_id))
        if to_str(ended[2]) != "query":  # a query's state expires on its own (``query_state``)
            expire_bookkeeping(self.redis, self.k, job_id)
        if int(ended[1]):
            created = to_str(ended[3])
            seconds = now - float(created) if created else None
            tier = self.tier()
            for listener in _listeners:
                listener.job_finished(to_str(ended[2]) or "unknown", status, seconds, tier)
        return True

    # ---- chunk progress
    def add_chunks(self, job_id: str, chunk_ids: list[str]) -> None:
        if chunk_ids:
            self.redis.sadd(self.k.job_chunks(job_id), *chunk_ids)

    def chunk_finished(self, job_id: str, chunk_id: str, failure: ChunkFailure | None = None) -> bool:
        """Record the chunk as finished (or failed); True when this made extraction complete (every
        document chunked, every chunk finished), in the same round trip."""
        pipe = self.redis.pipeline(transaction=True)
        if failure is not None:
            pipe.hset(self.k.job_failures(job_id), chunk_id, failure.model_dump_json())
        else:
            pipe.hdel(self.k.job_failures(job_id), chunk_id)
        pipe.sadd(self.k.job_chunks_done(job_id), chunk_id)
        self._completion_queries(pipe, job_id)
        docs, docs_done, missing = pipe.execute()[-3:]
        for listener in _listeners:
            listener.chunks_finished(1, "failed" if failure is not None else "ok")
        return docs_done >= docs and not missing

    def _completion_queries(self, pipe, job_id: str) -> None:
        pipe.scard(self.k.job_docs(job_id))
        pipe.scard(self.k.job_docs_done(job_id))
        pipe.execute_command("EVAL", MISSING, 2, self.k.job_chunks(job_id), self.k.job_chunks_done(job_id))

    def doc_chunked(self, job_id: str, doc_id: str) -> None:
        self.redis.sadd(self.k.job_docs_done(job_id), doc_id)

    def extraction_complete(self, job_id: str) -> bool:
        pipe = self.redis.pipeline(transaction=True)
        self._completion_queries(pipe, job_id)
        docs, docs_done, missing = pipe.execute()
        return docs_done >= docs and not missing

    def failures(self, job_id: str) -> list[ChunkFailure]:
        raw = self.redis.hgetall(self.k.job_failures(job_id))
        return sorted((ChunkFailure.model_validate_json(v) for v in raw.values()), key=lambda f: f.chunk_id)

    def doc_ids(self, job_id: str) -> list[str]:
        return sorted(to_str(x) for x in self.redis.smembers(self.k.job_docs(job_id)))

    def chunk_count(self, job_id: str) -> int:
        return int(self.redis.scard(self.k.job_chunks(job_id)))

    def record_warnings(self, job_id: str, chunk_id: str, warnings: list[str]) -> None:
        """Keep what the extraction of ``chunk_id`` warned about (the first ten)."""
        self.redis.hset(self.k.job_warnings(job_id), chunk_id, json.dumps(warnings[:10]))

    def record_report_errors(self, job_id: str, errors: dict[str, str]) -> None:
        if errors:
            self.redis.hset(self.k.job_report_errors(job_id), mapping=errors)

    def usage(self, job_id: str) -> dict:
        return job_usage(self.redis, self.tenant, job_id)

    def usage_and_created(self, job_id: str) -> tuple[dict, float | None]:
        """The job's usage (``usage``) and when it was created, in one round trip (a query's result needs both)."""
        pipe = self.redis.pipeline(transaction=True)
        pipe.hgetall(self.k.job_usage(job_id))
        pipe.hget(self.k.job(job_id), "created_at")
        raw, created = pipe.execute()
        return parse_job_usage(raw), float(created) if created is not None else None

    # ---- planned batches
    def plan_batches(self, job_id: str, stage: str, payloads: list, total_field: str) -> None:
        """Store the payload of every batch of ``stage`` and their count in the job field ``total_field``;
        the stage joins the job's batch stages (its done set is read by ``snapshot`` and ``progress``)."""
        pipe = self.redis.pipeline(transaction=True)
        for i, payload in enumerate(payloads):
            pipe.set(self.k.job_batch(job_id, stage, i), json.dumps(payload))
        pipe.sadd(self.k.job_batch_stages(job_id), stage)
        pipe.hset(self.k.job(job_id), mapping={total_field: len(payloads), "updated_at": time.time()})
        pipe.execute()

    def batch(self, job_id: str, stage: str, index: int, default: Any = None) -> Any:
        raw = self.redis.get(self.k.job_batch(job_id, stage, index))
        return json.loads(raw) if raw else default

    def _batch_stages(self, job_id: str) -> list[str]:
        return sorted(to_str(s) for s in self.redis.smembers(self.k.job_batch_stages(job_id)))

    # ---- stage fan-in
    def claim_advance(self, job_id: str, stage: str, token: str) -> bool:
        """True for the one caller allowed to start ``stage``; the same ``token`` (a redelivered
        task id) may claim again, so a crash between claim and enqueue does not strand the job."""
        key = self.k.job_flags(job_id)
        if self.redis.hsetnx(key, stage, token):
            return True
        return to_str(self.redis.hget(key, stage)) == token

    def batch_done_of(self, job_id: str, stage: str, batch: str, total_field: str) -> tuple[int, int]:
        """Mark ``batch`` of ``stage`` done and delete its payload (no step reads it again: a late redelivery of a
        done batch reads an empty one); (batches done, the total in the job field ``total_field``)."""
        key = self.k.job_stage_done(job_id, stage)
        pipe = self.redis.pipeline(transaction=False)
        pipe.sadd(key, batch)
        pipe.delete(self.k.job_batch(job_id, stage, int(batch)))
        pipe.scard(key)
        pipe.hget(self.k.job(job_id), total_field)
        _, _, done, total = pipe.execute()
        return int(done), int(total or 0)

    def snapshot(self, job_id: str) -> JobSnapshot | None:
        """Everything the watchdog needs to tell what a job still has to do (one round trip + one for
        the per-stage done sets); read only for a job about to be resumed."""
        pipe = self.redis.pipeline(transaction=True)
        pipe.hgetall(self.k.job(job_id))
        pipe.smembers(self.k.job_docs(job_id))
        pipe.smembers(self.k.job_docs_done(job_id))
        pipe.smembers(self.k.job_chunks(job_id))
        pipe.smembers(self.k.job_chunks_done(job_id))
        pipe.hgetall(self.k.job_flags(job_id))
        self.read_parse_sets(pipe, job_id)
        pipe.hkeys(self.k.query_map_results(job_id))  # a global query's map groups that answered
        raw, docs, docs_done, chunks, chunks_done, flags, files, parsed, answered = pipe.execute()
        if not raw:
            return None
        fields = {to_str(k): to_str(v) for k, v in raw.items()}
        stages = self._batch_stages(job_id)
        pipe = self.redis.pipeline(transaction=True)
        for stage in stages:
            pipe.smembers(self.k.job_stage_done(job_id, stage))
        done_sets = zip(stages, pipe.execute(), strict=True)
        batches_done = {stage: {int(to_str(b)) for b in done} for stage, done in done_sets}
        if answered:  # the batches of the query flow's map stage (``shared.pipeline.flow.MAP``)
            batches_done["map"] = {int(to_str(g)) for g in answered}
        return JobSnapshot(
            tenant=self.tenant, job_id=job_id, fields=fields,
            docs={to_str(x) for x in docs}, docs_done={to_str(x) for x in docs_done},
            docs_files={to_str(x) for x in files}, docs_parsed={to_str(x) for x in parsed},
            chunks={to_str(x) for x in chunks}, chunks_done={to_str(x) for x in chunks_done},
            flags={to_str(k): to_str(v) for k, v in flags.items()}, batches_done=batches_done,
        )

    def progress(self, job_id: str) -> tuple[str | None, str]:
        """(status, fingerprint) from counters only (O(1) commands, whatever the job's size); the
        fingerprint changes whenever the job makes progress: an item delivered for the first time, a
        chunk or batch finished, a stage claimed or started. Status None: the job does not exist."""
        pipe = self.redis.pipeline(transaction=False)
        pipe.hmget(self.k.job(job_id), "status", "stage", "updated_at")
        pipe.hlen(self.k.deliveries(job_id))
        pipe.scard(self.k.job_docs_done(job_id))
        pipe.scard(self.k.job_chunks_done(job_id))
        pipe.hlen(self.k.job_flags(job_id))
        pipe.smembers(self.k.job_batch_stages(job_id))
        (status, stage, updated), *counts, stages = pipe.execute()
        pipe = self.redis.pipeline(transaction=False)
        for stage_name in sorted(to_str(s) for s in stages):
            pipe.scard(self.k.job_stage_done(job_id, stage_name))
        batches = pipe.execute()
        status = to_str(status) if status is not None else None
        return status, json.dumps([status, to_str(stage), to_str(updated), *counts, *batches])

    # ---- view
    def view(self, job_id: str) -> dict | None:
        raw = self.redis.hgetall(self.k.job(job_id))
        if not raw:
            return None
        job = {to_str(k): to_str(v) for k, v in raw.items()}
        pipe = self.redis.pipeline(transaction=True)
        pipe.scard(self.k.job_chunks(job_id))
        pipe.scard(self.k.job_chunks_done(job_id))
        pipe.hlen(self.k.job_failures(job_id))
        pipe.scard(self.k.job_docs_done(job_id))
        total, finished, failed, docs_chunked = pipe.execute()
        if ended := job.pop(ENDED_COUNTS, None):  # its sets may have expired (``bookkeeping``)
            total, finished, docs_chunked = json.loads(ended)
        for f in ("created_at", "updated_at", "started_at", "finished_at"):
            if f in job:
                job[f] = float(job[f])
        for f in ("params", "result"):
            if f in job:
                job[f] = json.loads(job[f])
        job["progress"] = {
            "documents": int(job.get("documents", 0)), "documents_chunked": docs_chunked,
            "chunks_total": total, "chunks_done": finished - failed, "chunks_failed": failed,
            "stage": job.get("stage"),
        }
        job["failures"] = [*json.loads(job.pop("refused", "[]")), *(f.model_dump() for f in self.failures(job_id)), *(
            {"doc_id": d, "stage": "parse", "cause": c} for d, c in sorted(self.document_failures(job_id).items()))]
        job["usage"] = job_usage(self.redis, self.tenant, job_id)
        job["waiting"] = waiting_view(job)
        job["stage_times"] = self.stage_times(job_id)
        return job
