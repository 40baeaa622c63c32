"""How a pipeline step tells the query workers that a tenant's index changed, and how a job waits for their
warm-ups (``warmup.CacheWarmer`` hears the announcements and warms)."""

from __future__ import annotations

import logging
import time

from shared.infra.redis.conn import to_str
from shared.infra.redis.keys import Keys, index_updated_channel, index_updated_key

log = logging.getLogger(__name__)
RECENT_KEPT = 1000  # tenants remembered in the recently-indexed set


def announce_index_update(redis, tenant: str, job_id: str | None = None) -> int:
    """Tell every query worker that ``tenant``'s index changed, and remember when (a worker that starts
    warms the most recent ones); how many warmers heard it. With ``job_id``, each of them acknowledges on the
    job's key once its warm-up is done (``await_warm_ups``). Best effort: a lost message only leaves the next
    query cold, and a failed announcement counts no listener."""
    try:
        pipe = redis.pipeline(transaction=False)
        pipe.zadd(index_updated_key(), {tenant: time.time()})
        pipe.zremrangebyrank(index_updated_key(), 0, -RECENT_KEPT - 1)
        pipe.execute()
        # not in the pipeline: a cluster's node pipelines refuse it
        return int(redis.publish(index_updated_channel(), f"{tenant} {job_id}" if job_id else tenant) or 0)
    except Exception:  # noqa: BLE001 - an announcement must never fail the pipeline step that made it
        log.warning("could not announce the index update of tenant %s", tenant, exc_info=True)
        return 0


ACK_TTL_S = 60  # an acknowledgement nobody waits for any more expires


def acknowledge_warm_up(redis, tenant: str, job_id: str) -> None:
    """A warmer's answer to an announcement that named a job: this process is done warming (or had no room)."""
    key = Keys(tenant).job_warmed(job_id)
    pipe = redis.pipeline(transaction=False)
    pipe.rpush(key, "1")
    pipe.expire(key, ACK_TTL_S)
    pipe.execute()


def await_warm_ups(redis, tenant: str, job_id: str, listeners: int, timeout_s: float) -> int:
    """Wait until the ``listeners`` warmers that heard ``job_id``'s announcement acknowledged it, for at most
    ``timeout_s``; how many did. A job that ends after this has an index its query workers serve warm (its
    first query does not race the warm-up for the same process). In a Redis Cluster a publish counts the
    listeners of one node only, so the wait covers those; the others warm as before. Never raises."""
    key, acked = Keys(tenant).job_warmed(job_id), 0
    deadline = time.monotonic() + timeout_s
    try:
        while acked < listeners:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            if redis.blpop([key], timeout=max(0.01, min(left, 1.0))) is not None:  # BLPOP 0 would block forever
                acked += 1
        redis.delete(key)
    except Exception:  # noqa: BLE001 - the job ends anyway; its first query may only be colder
        log.warning("waiting for the warm-ups of job %s failed", job_id, exc_info=True)
    return acked


def recent_announcements(redis, limit: int) -> dict[str, float]:
    """The ``limit`` tenants whose index changed most recently, latest first, with when it last changed (the
    announcement's time: a tenant warmed after reading it is current until it changes)."""
    return {to_str(t): float(at) for t, at in
            redis.zrevrange(index_updated_key(), 0, max(0, limit - 1), withscores=True)}
