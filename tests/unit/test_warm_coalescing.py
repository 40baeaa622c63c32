"""A query worker's cache warmer that falls behind a tenant's announcements catches up in one warm-up per tenant
(``CacheWarmer.on_messages``), acknowledging every job that waits for it (real Redis, no Celery)."""

from __future__ import annotations

import threading
import time

from shared.infra.store.bm25_cache import BM25Cache
from shared.infra.store.warmup import CacheWarmer, announce_index_update
from tests.unit.test_query_warmup import _fill, _wait, running


def test_announcements_queued_during_a_warm_up_are_warmed_once_per_tenant_and_every_job_is_acknowledged(
        redis_client, tenant):
    """A tenant whose batches end faster than its warm-ups take: what queued meanwhile costs one warm-up per tenant,
    not one per announcement, and each job that named the tenant hears its acknowledgement."""
    from shared.infra.store.warmup import await_warm_ups

    other = tenant + "-b"
    _fill(redis_client, tenant, "red fox")
    _fill(redis_client, other, "grey owl")
    cache, warmed, started, release = BM25Cache(redis_client), [], threading.Event(), threading.Event()

    def on_warm(name: str, _seconds: float, job: str) -> None:
        if not warmed:
            started.set()
            release.wait(20)  # the first warm-up runs while the rest are announced
        warmed.append((name, job))

    warmer = CacheWarmer(redis_client, lambda: cache, on_warm=on_warm, poll_s=0.05)
    with running(warmer, release):
        assert warmer.subscribed.wait(10)
        announce_index_update(redis_client, tenant, "j1")
        assert started.wait(20)
        for data in ((tenant, None), (tenant, "j2"), (other, "j3"), (tenant, "j4"), (other, None)):
            announce_index_update(redis_client, *data)
        time.sleep(0.3)  # all five queued behind the first warm-up
        release.set()
        for owner, job in ((tenant, "j1"), (tenant, "j2"), (other, "j3"), (tenant, "j4")):
            assert await_warm_ups(redis_client, owner, job, 1, timeout_s=20) == 1, job
        assert _wait(lambda: len(warmed) == 3)
        time.sleep(0.3)
        assert warmed == [(tenant, "j1"), (tenant, "j2"), (other, "j3")]  # one each, booked to its first job
