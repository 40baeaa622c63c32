"""A job waiting for an unreachable LLM endpoint: when it began, when the job gives up, the last error. The wait
half of ``JobStore``; the workers decide what to do with it (``workers.llm_wait``)."""

from __future__ import annotations

import time
from typing import Any

from shared.infra.redis.conn import to_str
from shared.infra.redis.keys import Keys

WAIT_SINCE = "llm_wait_since"  # job fields: set while the job waits, removed once the LLM answers again
WAIT_UNTIL = "llm_wait_until"
WAIT_ERROR = "llm_wait_error"
WAITING = "waiting for the LLM"

# One round trip: the wait's start is kept (HSETNX) so that every step of the job waiting measures the same wait;
# the error and ``updated_at`` are refreshed (the watchdog sees the job is alive); the step's delivery is uncounted
# (KEYS[2], field ARGV[7]: the step is enqueued again on purpose, its worker was not lost); returns the start and
# the status.
_WAIT = """
local key = KEYS[1]
if redis.call('HEXISTS', KEYS[2], ARGV[7]) == 1 then redis.call('HINCRBY', KEYS[2], ARGV[7], -1) end
redis.call('HSETNX', key, ARGV[1], ARGV[4])
local since = tonumber(redis.call('HGET', key, ARGV[1]))
redis.call('HSET', key, ARGV[2], since + tonumber(ARGV[5]), ARGV[3], ARGV[6], 'updated_at', ARGV[4])
return {tostring(since), redis.call('HGET', key, 'status') or ''}
"""


class LLMWait:
    """A mixin of ``JobStore``: uses its ``redis`` and ``k``."""

    redis: Any
    k: Keys

    def llm_waiting(self, job_id: str, delivery: str, error: str, bound_s: float,
                    now: float | None = None) -> tuple[float, str]:
        """Record that the step ``delivery`` ("task:item", as ``admit`` counts it) of the job found the LLM
        unreachable with ``error`` and is to run again: (when the job began to wait, its status). The job gives up
        ``bound_s`` after the wait began."""
        now = time.time() if now is None else now
        since, status = self.redis.eval(_WAIT, 2, self.k.job(job_id), self.k.deliveries(job_id), WAIT_SINCE,
                                        WAIT_UNTIL, WAIT_ERROR, repr(now), bound_s, error[:300], delivery)
        return float(to_str(since)), to_str(status)

    def llm_answered(self, job_id: str) -> None:
        """The LLM answered a step of the job again: the job no longer waits."""
        self.redis.hdel(self.k.job(job_id), WAIT_SINCE, WAIT_UNTIL, WAIT_ERROR)


def waiting_view(job: dict) -> dict | None:
    """The ``waiting`` field of a job's view from its stored fields: None unless it waits for the LLM now."""
    since = job.get(WAIT_SINCE)
    if since is None or job.get("status") in ("succeeded", "failed", "canceled"):
        return None
    return {"for": "llm", "message": WAITING, "since": float(since),
            "gives_up_at": float(job.get(WAIT_UNTIL) or since), "last_error": job.get(WAIT_ERROR)}
