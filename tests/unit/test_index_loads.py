"""A tenant's query indexes loaded side by side: one key's build never holds up another's, and a cold tenant's
indexes are all loading before its first query reaches them (real Redis, no Celery)."""

from __future__ import annotations

import threading
import time

from shared.domain.storage import VectorItem
from shared.infra.store.bm25_cache import BM25Cache
from shared.infra.store.index_loads import index_loads, prefetch_cold
from shared.infra.store.lru import LRU
from shared.infra.store.redis_graph import GraphStore
from shared.infra.store.redis_vectors import RedisVectorStore
from tests.unit.test_query_warmup import _fill, _wait


def test_a_long_build_holds_up_only_its_own_key():
    """One tenant's index being rebuilt never holds up another's (nor another index of the same tenant), while two
    threads asking for the same key build it once."""
    lru: LRU[str, int] = LRU(8)
    started, release, builds = threading.Event(), threading.Event(), []

    def slow() -> int:
        builds.append("slow")
        started.set()
        release.wait(10)
        return 1

    waiters = [threading.Thread(target=lru.get_or_build, args=("big", lambda v: True, slow)) for _ in range(2)]
    waiters[0].start()
    assert started.wait(10)
    waiters[1].start()
    assert lru.get_or_build("small", lambda v: True, lambda: 2) == 2  # while "big" is still building
    release.set()
    for t in waiters:
        t.join(10)
    assert lru.get("big") == 1 and builds == ["slow"]


def test_a_cold_tenant_s_indexes_load_side_by_side_before_its_first_query(redis_client, tenant):
    _fill(redis_client, tenant, "brown bear")
    vectors = RedisVectorStore(redis_client)
    vectors.upsert(tenant, "entities", [VectorItem(id="BROWN BEAR", vector=[1.0, 0.0], payload={})])
    vectors.upsert(tenant, "chunks", [VectorItem(id=f"{tenant}-c1", vector=[0.0, 1.0], payload={})])
    cache, store = BM25Cache(redis_client), GraphStore(redis_client, tenant)
    assert len(index_loads(store, cache, vectors, "naive")) == 2  # naive reads the chunk indexes only
    prefetch_cold(store, cache, vectors, "global")  # global reads none of them
    assert not cache.tenants() and vectors.loads == 0
    prefetch_cold(store, cache, vectors, "local")
    assert _wait(lambda: cache.walk_builds == 1 and cache.builds == 2 and vectors.loads == 2)
    assert [c for c, _ in cache(tenant, "chunks").query("bear market")] == [f"{tenant}-c1"]
    assert cache.builds == 2 and vectors.search(tenant, "chunks", [0.0, 1.0], 1) and vectors.loads == 2
    prefetch_cold(store, cache, vectors, "local")  # held already: nothing loaded again
    time.sleep(0.2)
    assert cache.builds == 2 and cache.walk_builds == 1 and vectors.loads == 2
