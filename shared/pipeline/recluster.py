"""The whole-graph clustering a job left for later (``ClusterSettings.recluster_quiet_s``).

A job whose changes take the tenant's graph past ``cluster.incremental_max_growth`` is clustered incrementally
like the others, and the cluster stage marks the tenant due (:func:`mark_due`, the global zset
``gf:recluster_due``: tenant -> when it was marked). The job watchdog's sweep (one worker of the fleet at a time)
submits a ``recluster`` job (:func:`submit_due`) for a due tenant once it has had no ingestion or deletion running
for ``recluster_quiet_s``, or, with none running, ``recluster_max_delay_s`` after it was marked. A tenant still
ingesting by then is clustered whole by the next cluster stage of its own jobs (:func:`overdue`).

A ``recluster`` job is an ingestion with no document on the same flow (``shared.pipeline.flow.INGEST``): its
merge takes whatever is dirty, its cluster stage clusters the whole graph when the tenant is still past the bound
(``cluster_stage.run_cluster(whole_due=True)``), its report stage writes the reports of the communities that moved
(a report within the drift bounds is kept), and it shows in the tenant's jobs, usage and metrics like any job.
A whole-graph clustering, wherever it runs, takes the mark away.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable

from shared.domain.ids import new_job_id
from shared.infra.jobs.query_submit import is_query_id
from shared.infra.jobs.store import JobStore, parse_active_member
from shared.infra.messaging.messages import Message
from shared.infra.redis.conn import to_str
from shared.infra.redis.keys import Keys, recluster_due_key
from shared.pipeline.flow import Flow

log = logging.getLogger(__name__)
KIND = "recluster"
RECENT_JOBS = 100  # how far back among a tenant's jobs its last ingestion is looked for


def deferring(settings) -> bool:
    """Whether a job past the clustering bound leaves the whole-graph clustering to a ``recluster`` job."""
    return settings.cluster.recluster_quiet_s > 0 and settings.cluster.incremental_max_growth > 0


def past_bound(meta: dict[str, str], settings, pending: int = 0) -> bool:
    """Whether the entities and relations changed since the last whole-graph Leiden (and ``pending`` more) exceed
    ``incremental_max_growth`` of the graph's size then (``cluster_meta``); true when it was never clustered."""
    if "full_size" not in meta:
        return True
    changed = int(meta.get("changed", 0)) + pending
    return changed > settings.cluster.incremental_max_growth * int(meta["full_size"])


def clustered_current(store, kind: str | None, settings) -> bool:
    """Whether a job may skip its cluster stage: the communities were computed from the graph as it is, and, for a
    ``recluster`` job, from a whole-graph Leiden within the bound."""
    if not store.clustered_current():
        return False
    return kind != KIND or not past_bound(store.cluster_meta(), settings)


def mark_due(redis, tenant: str, now: float | None = None) -> None:
    """The tenant's communities are past the bound: a ``recluster`` job is due (the first mark's time is kept)."""
    redis.zadd(recluster_due_key(), {tenant: time.time() if now is None else now}, nx=True)


def clear_due(redis, tenant: str) -> None:
    """The whole graph was clustered: nothing is due."""
    redis.zrem(recluster_due_key(), tenant)


def due(marked_at: float, busy: bool, last_activity: float | None, now: float, quiet_s: float,
        max_delay_s: float) -> bool:
    """Whether a tenant marked at ``marked_at`` gets its ``recluster`` job now: no ingestion running (queries do not
    count), and the last one ended ``quiet_s`` ago or the mark is ``max_delay_s`` old. Never while one runs: the
    job's merge would take the keys that ingestion is still extracting into and contend with its writes, and the
    whole-graph Leiden would read a graph half merged.
    A tenant that keeps ingesting past ``max_delay_s`` gets its whole-graph clustering from that ingestion's own
    cluster stage instead (:func:`overdue`)."""
    if busy:
        return False
    return now - marked_at >= max_delay_s or last_activity is None or now - last_activity >= quiet_s


def overdue(redis, tenant: str, settings, now: float | None = None) -> bool:
    """Whether the tenant has been marked due for ``recluster_max_delay_s`` or longer: the next cluster stage of any
    of its jobs clusters the whole graph itself (``cluster_stage.run_cluster``), so the communities of a tenant that
    never stops ingesting are past the bound no longer than that (and one job's run)."""
    marked_at = redis.zscore(recluster_due_key(), tenant)
    now = time.time() if now is None else now
    return marked_at is not None and now - float(marked_at) >= settings.cluster.recluster_max_delay_s


def last_activity(redis, tenant: str) -> float | None:
    """When the tenant's newest ingestion or deletion (among its 100 newest jobs: queries do not count) ended, or,
    still running, was last updated; None when there is none."""
    newest = next((j for j in map(to_str, redis.zrevrange(Keys(tenant).jobs(), 0, RECENT_JOBS - 1))
                   if not is_query_id(j)), None)
    if newest is None:
        return None
    finished, updated = redis.hmget(Keys(tenant).job(newest), ["finished_at", "updated_at"])
    value = finished if finished is not None else updated
    return float(to_str(value)) if value is not None else None


def ingesting(active_members: Iterable[str]) -> set[str]:
    """The tenants with an ingestion or deletion listed in ``gf:active_jobs`` (a query keeps no tenant busy: its
    workers are not the ones a recluster job uses)."""
    return {tenant for tenant, job_id in map(parse_active_member, active_members) if not is_query_id(job_id)}


def submit_due(redis, settings, send: Callable[[Message], None], busy_tenants: Iterable[str],
               now: float | None = None) -> list[tuple[str, str]]:
    """Submit a ``recluster`` job for every tenant due (:func:`due`); returns ``(tenant, job id)`` per job. The mark
    goes once the job's first message is sent: a crash before leaves it for the next sweep."""
    cfg, now = settings.cluster, time.time() if now is None else now
    busy, submitted = set(busy_tenants), []
    for member, marked_at in redis.zrange(recluster_due_key(), 0, -1, withscores=True):
        tenant = to_str(member)
        if not due(float(marked_at), tenant in busy, last_activity(redis, tenant), now, cfg.recluster_quiet_s,
                   cfg.recluster_max_delay_s):
            continue
        job_id, jobs = new_job_id(), JobStore(redis, tenant)
        jobs.create(job_id, KIND)
        for msg in Flow(jobs, tenant, job_id, f"recluster:{now}").extraction_progressed(complete=True):
            send(msg)  # the merge stage's planner: nothing to chunk or extract
        redis.zrem(recluster_due_key(), tenant)
        log.info("tenant %s: whole-graph clustering due since %.0f s; submitted %s", tenant, now - float(marked_at),
                 job_id)
        submitted.append((tenant, job_id))
    return submitted
