"""The query worker's index cache is bounded by bytes: the indexes count their own memory, and a cache over
its bound lets the least recently used tenants go, whatever their number (real Redis for the cache)."""

from __future__ import annotations

import random
import tracemalloc

import pytest

from shared.config import Settings
from shared.domain.retrieval.bm25 import BM25Index
from shared.domain.retrieval.walk_build import build_walk
from shared.infra.store.bm25_cache import BM25Cache
from shared.infra.store.lru import LRU
from tests.unit.test_query_warmup import _fill


def _allocated(build):
    """What ``build()`` leaves allocated (tracemalloc), and its result. Built once before, untraced: what a first
    build leaves behind once per process (a lazy import, a compiled pattern) is not the index's, and counting it made
    the test depend on which tests ran before it."""
    build()
    tracemalloc.start()
    try:
        value = build()
        current, _peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return value, current


def test_index_sizes_are_near_what_they_allocate():
    rnd = random.Random(7)
    words = [f"w{i}" for i in range(3000)]
    docs = [(f"chunk-{i:06d}", " ".join(rnd.choice(words) for _ in range(120))) for i in range(1500)]
    index, allocated = _allocated(lambda: BM25Index.build(docs))
    assert 0.5 * allocated <= index.nbytes <= 2 * allocated
    entities = {f"ENTITY {k}": [docs[rnd.randrange(len(docs))][0] for _ in range(3)] for k in range(4000)}
    edges = [(f"ENTITY {rnd.randrange(4000)}", f"ENTITY {rnd.randrange(4000)}", 1.0) for _ in range(10000)]
    walk, allocated = _allocated(lambda: build_walk([d for d, _ in docs], entities, edges))
    assert 0.5 * allocated <= walk.nbytes <= 2 * allocated


def test_lru_evicts_by_bytes_and_keeps_the_newest():
    lru: LRU[str, bytes] = LRU(None, max_bytes=100, size_of=len)
    lru.put("a", b"x" * 40)
    lru.put("b", b"x" * 40)
    assert lru.get("a") is not None  # "a" is now the most recent
    lru.put("c", b"x" * 40)  # 120 bytes: the least recently used ("b") goes
    assert list(lru) == ["a", "c"] and lru.nbytes == 80
    lru.put("a", b"x" * 10)  # replacing a value counts its new size
    assert lru.nbytes == 50
    lru.put("big", b"x" * 500)  # over the bound alone: kept, everything older goes
    assert list(lru) == ["big"] and lru.nbytes == 500
    lru.clear()
    assert lru.nbytes == 0 and len(lru) == 0
    with pytest.raises(ValueError):
        LRU(None, max_bytes=100)  # a byte bound needs sizes


def test_cache_holds_tenants_by_bytes(redis_client, tenant):
    tenants = [f"{tenant}-{i}" for i in range(4)]
    for i, t in enumerate(tenants):
        _fill(redis_client, t, f"grey goose number{i}")
    probe = BM25Cache(redis_client)
    probe.warm(tenants[0])
    one_tenant = probe.nbytes
    assert one_tenant > 0
    cache = BM25Cache(redis_client, max_bytes=int(2.5 * one_tenant))  # room for two tenants' indexes
    for t in tenants:
        cache.warm(t)
    # the two most recent are whole, the oldest is gone (the second oldest may keep an index in the rest)
    assert set(tenants[2:]) <= cache.tenants() and tenants[0] not in cache.tenants()
    assert cache.nbytes <= 2.5 * one_tenant
    assert cache.has_room_for(tenants[3])
    builds = cache.builds
    cache(tenants[3], "chunks")  # still cached: no rebuild
    assert cache.builds == builds


def test_the_bound_is_a_setting(monkeypatch):
    monkeypatch.setenv("GRAPHFLEET_QUERY__INDEX_CACHE_MB", "64")
    assert Settings().query.index_cache_mb == 64
