"""Per-tenant quotas: request rate (token bucket in Redis), concurrent jobs, monthly token budget.

Defaults live here; a tenant record may override any of them (``TenantLimits``). All state is in
Redis under the tenant's prefix, so every gateway process enforces the same limits:

- ``gf:t:{tenant}:quota:rate``   hash ``tokens``/``ts``: the request token bucket (clock = Redis TIME)
- ``gf:t:{tenant}:quota:active`` zset of ``job:{id}`` (queued/running jobs) and ``res:{uuid}``
  (reservations held while a submission is in flight), scored by time
"""

from __future__ import annotations

import math
import time
import uuid
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field

from shared.infra.redis.conn import to_str
from shared.infra.redis.keys import Keys
from shared.infra.tenancy.ledger import month_tokens, next_month_start

DEFAULT_REQUESTS_PER_MINUTE = 600
DEFAULT_MAX_CONCURRENT_JOBS = 20
DEFAULT_MONTHLY_TOKEN_BUDGET: int | None = None  # unlimited
RESERVATION_TTL_S = 120.0
CONCURRENCY_RETRY_AFTER_S = 5

_TERMINAL = {"succeeded", "failed", "canceled"}
JOB_MEMBER = "job:"  # a job's member of the quota set (``job_member``); reservations are "res:" members


class TenantLimits(BaseModel):
    """Per-tenant overrides; ``None`` means the default from this module."""

    model_config = ConfigDict(extra="forbid")

    requests_per_minute: int | None = Field(None, ge=1, le=1_000_000)
    burst: int | None = Field(None, ge=1, le=1_000_000, description="bucket size; default = requests_per_minute")
    max_concurrent_jobs: int | None = Field(None, ge=1, le=100_000)
    monthly_token_budget: int | None = Field(None, ge=0, description="prompt + completion tokens per month")


@dataclass(frozen=True)
class Limits:
    requests_per_minute: int
    burst: int
    max_concurrent_jobs: int
    monthly_token_budget: int | None


def effective_limits(overrides: TenantLimits | None) -> Limits:
    o = overrides or TenantLimits()
    rpm = o.requests_per_minute or DEFAULT_REQUESTS_PER_MINUTE
    budget = o.monthly_token_budget if o.monthly_token_budget is not None else DEFAULT_MONTHLY_TOKEN_BUDGET
    return Limits(rpm, o.burst or rpm, o.max_concurrent_jobs or DEFAULT_MAX_CONCURRENT_JOBS, budget)


class QuotaExceeded(Exception):
    def __init__(self, code: str, message: str, retry_after: int):
        super().__init__(message)
        self.code = code
        self.message = message
        self.retry_after = max(1, int(retry_after))


def _rate_key(tenant: str) -> str:
    return Keys(tenant).quota_rate()


def _active_key(tenant: str) -> str:
    return Keys(tenant).quota_active()


_BUCKET = """
if redis.replicate_commands then redis.replicate_commands() end
local rate = tonumber(ARGV[1])
local cap = tonumber(ARGV[2])
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local v = redis.call('HMGET', KEYS[1], 'tokens', 'ts')
local tokens = tonumber(v[1]) or cap
local ts = tonumber(v[2]) or now
tokens = math.min(cap, tokens + math.max(0, now - ts) * rate)
local allowed = 0
local wait = 0
if tokens >= 1 then
  tokens = tokens - 1
  allowed = 1
else
  wait = (1 - tokens) / rate
end
redis.call('HSET', KEYS[1], 'tokens', tostring(tokens), 'ts', tostring(now))
redis.call('EXPIRE', KEYS[1], math.ceil(cap / rate) + 60)
return {allowed, tostring(wait)}
"""


def check_rate(redis, tenant: str, limits: Limits) -> None:
    """Take one token from the tenant's bucket or raise QuotaExceeded."""
    rate = limits.requests_per_minute / 60.0
    allowed, wait = redis.eval(_BUCKET, 1, _rate_key(tenant), repr(rate), str(limits.burst))
    if not int(allowed):
        raise QuotaExceeded("rate_limited", f"more than {limits.requests_per_minute} requests per minute",
                            math.ceil(float(wait)))


def job_member(job_id: str) -> str:
    """A job's member of the tenant's ``quota:active`` set (``JobStore`` removes it when the job ends)."""
    return JOB_MEMBER + job_id


def active_jobs(redis, tenant: str) -> int:
    """Queued/running jobs plus live reservations, exactly: the members of jobs that ended without leaving the set
    (a job's end removes its member, ``JobStore``; a record expired or deleted does not) and expired reservations
    are pruned as a side effect. Reads every job's status: O(members)."""
    key, keys = _active_key(tenant), Keys(tenant)
    members = [(to_str(m), s) for m, s in redis.zrange(key, 0, -1, withscores=True)]
    jobs = [m for m, _ in members if m.startswith(JOB_MEMBER)]
    pipe = redis.pipeline(transaction=False)
    for m in jobs:
        pipe.hget(keys.job(m[len(JOB_MEMBER):]), "status")
    statuses = dict(zip(jobs, pipe.execute(), strict=True)) if jobs else {}
    now, stale, count = time.time(), [], 0
    for member, score in members:
        if member.startswith(JOB_MEMBER):
            status = statuses.get(member)
            if status is None or to_str(status) in _TERMINAL:
                stale.append(member)
                continue
        elif now - score > RESERVATION_TTL_S:
            stale.append(member)
            continue
        count += 1
    if stale:
        redis.zrem(key, *stale)
    return count


def _recount_due(redis, tenant: str) -> bool:
    """Whether no exact count ran for ``tenant`` in the last ``CONCURRENCY_RETRY_AFTER_S`` (and one may run now)."""
    return bool(redis.set(Keys(tenant).quota_recount(), "1", nx=True, ex=CONCURRENCY_RETRY_AFTER_S))


def reserve_job_slot(redis, tenant: str, limits: Limits) -> str:
    """Hold one concurrent-job slot (race-safe: add first, then count); returns the reservation.

    The set's size, read in the same round trip as the add, bounds the exact count from above (it also holds what
    ended unseen), so a tenant under its limit is admitted in O(1) whatever the limit: the exact count
    (``active_jobs``, one status read per job) runs only when the size is over the limit, and then at most once per
    ``CONCURRENCY_RETRY_AFTER_S`` per tenant (a refused client is told to wait that long anyway): a tenant at a
    high limit that keeps submitting does not make each refusal read all its jobs. Were the exact count run on
    every submission, the gateway's CPU per submission would grow with the tenant's jobs in flight; this way it
    stays flat."""
    token, key = "res:" + uuid.uuid4().hex, _active_key(tenant)
    pipe = redis.pipeline(transaction=True)
    pipe.zadd(key, {token: time.time()})
    pipe.zcard(key)
    size = pipe.execute()[1]
    if size > limits.max_concurrent_jobs and (not _recount_due(redis, tenant)
                                              or active_jobs(redis, tenant) > limits.max_concurrent_jobs):
        redis.zrem(_active_key(tenant), token)
        raise QuotaExceeded("too_many_jobs", f"at most {limits.max_concurrent_jobs} queued or running jobs",
                            CONCURRENCY_RETRY_AFTER_S)
    return token


def commit_job_slot(redis, tenant: str, reservation: str, job_id: str) -> None:
    pipe = redis.pipeline(transaction=True)
    pipe.zadd(_active_key(tenant), {job_member(job_id): time.time()})
    pipe.zrem(_active_key(tenant), reservation)
    pipe.execute()


def release_job_slot(redis, tenant: str, reservation: str) -> None:
    redis.zrem(_active_key(tenant), reservation)


def check_token_budget(redis, tenant: str, limits: Limits, now: float | None = None) -> None:
    if limits.monthly_token_budget is None:
        return
    now = time.time() if now is None else now
    used = month_tokens(redis, tenant, now)
    if used >= limits.monthly_token_budget:
        raise QuotaExceeded("token_budget_exhausted",
                            f"{used} of {limits.monthly_token_budget} monthly tokens used",
                            math.ceil(next_month_start(now) - now))
