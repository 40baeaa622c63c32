"""Per-call usage records: the single source for job usage, the ledger and metrics."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from shared.domain.models import UsageRecord
from shared.infra.redis.conn import to_str
from shared.infra.redis.keys import Keys
from shared.infra.tenancy.tiers import TIERS, TierCache
from shared.infra.tenancy.usage_codec import decode_usage, encode_usage

UsageListener = Callable[[UsageRecord], None]


@dataclass(frozen=True)
class CallContext:
    """Who is calling and why: scopes cache entries and usage records."""

    tenant: str
    stage: str
    job_id: str = ""
    queue: str = ""
    tier: str = ""  # empty: looked up from the tenant record (shared.infra.tenancy.tiers)

    def with_stage(self, stage: str) -> CallContext:
        return CallContext(self.tenant, stage, self.job_id, self.queue, self.tier)


class UsageRecorder:
    """Writes each record to the tenant's usage stream and the job's counters, then notifies listeners."""

    def __init__(self, redis, listeners: list[UsageListener] | None = None, tiers: TierCache | None = None):
        self.redis = redis
        self.listeners = list(listeners or [])
        self.tiers = tiers or TIERS

    def record(self, rec: UsageRecord, also: Callable[[object], None] | None = None) -> None:
        """Write ``rec`` in one round trip; ``also(pipe)`` adds the caller's own writes of the tenant to it (the
        LLM cache entry of the answer just booked: ``LLMClient.chat``)."""
        if not rec.ts:
            rec.ts = time.time()
        if not rec.tier:
            rec.tier = self.tiers.tier(self.redis, rec.tenant)
        keys = Keys(rec.tenant)
        pipe = self.redis.pipeline(transaction=False)
        pipe.xadd(keys.usage_stream(), encode_usage(rec))
        if rec.job_id:
            jk = keys.job_usage(rec.job_id)
            pipe.hincrby(jk, "calls", 1)
            pipe.hincrby(jk, "prompt_tokens", rec.prompt_tokens)
            pipe.hincrby(jk, "completion_tokens", rec.completion_tokens)
            pipe.hincrbyfloat(jk, "cost_usd", rec.cost_usd)
            pipe.hincrby(jk, f"calls:{rec.stage}", 1)
            pipe.hincrby(jk, f"prompt_tokens:{rec.stage}", rec.prompt_tokens)
            pipe.hincrby(jk, f"completion_tokens:{rec.stage}", rec.completion_tokens)
            if rec.cache_hit:
                pipe.hincrby(jk, "cache_hits", 1)
            if rec.error:
                pipe.hincrby(jk, "errors", 1)
        if also is not None:
            also(pipe)
        pipe.execute()
        for listener in self.listeners:
            listener(rec)


def read_usage(redis, tenant: str, start_ts: float | None = None, end_ts: float | None = None):
    """All usage records of a tenant in [start_ts, end_ts] (stream ids are millisecond timestamps)."""
    lo = "-" if start_ts is None else str(int(start_ts * 1000))
    hi = "+" if end_ts is None else str(int(end_ts * 1000))
    return [decode_usage(fields, tenant) for _id, fields in redis.xrange(Keys(tenant).usage_stream(), lo, hi)]


def job_usage(redis, tenant: str, job_id: str) -> dict:
    return parse_job_usage(redis.hgetall(Keys(tenant).job_usage(job_id)))


def parse_job_usage(raw: dict) -> dict:
    """A job's usage hash (``HGETALL`` of its usage key) as totals and ``by_stage``."""
    usage: dict = {"calls": 0, "prompt_tokens": 0, "completion_tokens": 0, "cost_usd": 0.0, "by_stage": {}}
    for k, v in raw.items():
        key = to_str(k)
        val = float(v) if key == "cost_usd" else int(float(v))
        if ":" in key:
            metric, stage = key.split(":", 1)
            usage["by_stage"].setdefault(stage, {})[metric] = val
        else:
            usage[key] = val
    usage["cost_usd"] = round(usage["cost_usd"], 8)
    return usage
