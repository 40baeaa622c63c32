"""The concurrent-job quota (``shared.infra.tenancy.quotas``) on a real Redis: a job's end frees its slot, a tenant
under its limit is admitted without reading its jobs' statuses, and what ended unseen is pruned when it matters."""

from __future__ import annotations

import pytest

from shared.infra.jobs.store import JobStore
from shared.infra.redis.keys import Keys
from shared.infra.tenancy.quotas import (
    QuotaExceeded,
    commit_job_slot,
    effective_limits,
    job_member,
    reserve_job_slot,
)
from shared.infra.tenancy.quotas import TenantLimits as Overrides


class StatusReads:
    """The client, counting the job-status reads (``HGET`` in a pipeline) that an exact count makes."""

    def __init__(self, client):
        self.client, self.reads = client, 0

    def __getattr__(self, name):
        return getattr(self.client, name)

    def pipeline(self, *args, **kwargs):
        pipe, spy = self.client.pipeline(*args, **kwargs), self

        class Pipe:
            def __getattr__(self, name):
                return getattr(pipe, name)

            def hget(self, *a):
                spy.reads += 1
                return pipe.hget(*a)

        return Pipe()


def _submit(redis, tenant: str, job_id: str, limit: int) -> None:
    """What the gateway's submission does around the enqueue: reserve, create the job, commit."""
    reservation = reserve_job_slot(redis, tenant, effective_limits(Overrides(max_concurrent_jobs=limit)))
    JobStore(redis, tenant).create(job_id, "query")
    commit_job_slot(redis, tenant, reservation, job_id)


def test_a_jobs_end_frees_its_slot(redis_client, tenant):
    jobs = JobStore(redis_client, tenant)
    _submit(redis_client, tenant, "j1", limit=1)
    with pytest.raises(QuotaExceeded) as refused:
        _submit(redis_client, tenant, "j2", limit=1)
    assert refused.value.code == "too_many_jobs" and not jobs.exists("j2")
    assert jobs.finish("j1", "succeeded") is True
    assert redis_client.zscore(Keys(tenant).quota_active(), job_member("j1")) is None  # left with its end
    _submit(redis_client, tenant, "j2", limit=1)
    assert redis_client.zcard(Keys(tenant).quota_active()) == 1
    assert jobs.cancel("j2") is True and redis_client.zcard(Keys(tenant).quota_active()) == 0


def test_under_its_limit_a_tenant_is_admitted_without_reading_its_jobs(redis_client, tenant):
    """300 jobs in flight and a limit of 1,000: the submission reads no job's status (it read all 300 before). At
    the limit, the exact count runs once per retry interval, not on every refused submission."""
    for i in range(300):
        _submit(redis_client, tenant, f"j{i}", limit=1000)
    spy = StatusReads(redis_client)
    _submit(spy, tenant, "j300", limit=1000)
    assert spy.reads == 0
    with pytest.raises(QuotaExceeded):  # at the limit: the exact count reads each job's status, then refuses
        _submit(spy, tenant, "j301", limit=301)
    assert spy.reads == 301 and not JobStore(redis_client, tenant).exists("j301")
    with pytest.raises(QuotaExceeded):  # refused again within the retry interval: no second full count
        _submit(spy, tenant, "j302", limit=301)
    assert spy.reads == 301


def test_jobs_that_ended_unseen_are_pruned_when_the_limit_is_reached(redis_client, tenant):
    """A member whose job record expired or was deleted, or whose end did not remove it (a record written by an
    older version), counts until the set's size passes the limit; then the exact count drops it and admits."""
    key, jobs = Keys(tenant).quota_active(), JobStore(redis_client, tenant)
    _submit(redis_client, tenant, "live", limit=3)
    _submit(redis_client, tenant, "old", limit=3)
    redis_client.hset(jobs.k.job("old"), "status", "succeeded")  # ended without leaving the set
    redis_client.zadd(key, {job_member("gone"): 1.0})  # its record expired
    assert redis_client.zcard(key) == 3
    _submit(redis_client, tenant, "new", limit=3)
    members = {m.decode() if isinstance(m, bytes) else m for m in redis_client.zrange(key, 0, -1)}
    assert members == {job_member("live"), job_member("new")}
