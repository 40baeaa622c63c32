"""The touched memory a query worker reads cold indexes into (``pretouched``): buffers never overlap, a range comes
back only when no array views it, free ranges merge, a full or missing pool falls back to fresh memory, and the
index loads read their bytes into it intact."""

import gc
import random
import threading

import numpy as np
import pytest

from shared.infra import pretouched
from shared.infra.pretouched import ALIGN, TouchedPool
from shared.infra.redis.bulk_read import read_value
from shared.infra.redis.keys import Keys
from shared.infra.store.bm25_cache import BM25Cache
from shared.infra.store.index_snapshots import IndexSnapshots
from shared.infra.store.redis_vectors import RedisVectorStore
from tests.unit.test_index_snapshots import _fill, _rankings
from tests.unit.test_vector_rowid_snapshots import ITEMS, KIND, QUERIES, hits

MIB = 2**20


@pytest.fixture
def pool(monkeypatch):
    """A 4 MiB pool installed as the process's (restored after the test)."""
    made = TouchedPool(4 * MIB)
    monkeypatch.setattr(pretouched, "_pool", made)
    return made


def address(a: np.ndarray) -> int:
    return a.__array_interface__["data"][0]


def test_buffers_are_disjoint_aligned_writable_and_come_back_whole(pool):
    sizes = [1, 63, 64, 65, 100_000, MIB, 3]
    bufs = [pool.take(n) for n in sizes]
    assert [len(b) for b in bufs] == sizes
    assert all(address(b) % ALIGN == 0 and b.flags.writeable for b in bufs)
    for i, b in enumerate(bufs):
        b[:] = i
    assert all((b == i).all() for i, b in enumerate(bufs))  # no buffer wrote over another
    spans = sorted((address(b), address(b) + len(b)) for b in bufs)
    assert all(end <= nxt for (_, end), (nxt, _) in zip(spans, spans[1:], strict=False))
    assert pool.free_bytes() < pool.size
    del bufs, b
    gc.collect()
    assert pool.free_bytes() == pool.size
    whole = pool.take(pool.size)  # the ranges merged back into one
    assert whole is not None and len(whole) == pool.size


def test_a_view_keeps_its_range_until_it_goes(pool):
    root = pool.take(MIB)
    floats = root.view(np.float32)[10:20]  # as an index snapshot's arrays view their buffer
    mv = memoryview(root)[5:]
    del root
    gc.collect()
    assert pool.free_bytes() == pool.size - MIB
    del floats
    gc.collect()
    assert pool.free_bytes() == pool.size - MIB  # the memoryview still holds it
    del mv
    gc.collect()
    assert pool.free_bytes() == pool.size


def test_frees_in_any_order_merge_with_both_neighbours(pool):
    rng = random.Random(3)
    bufs = [pool.take(64 * (i + 1)) for i in range(40)]
    for i in rng.sample(range(40), 40):
        bufs[i] = None
        gc.collect()
    assert pool.free_bytes() == pool.size
    assert len(pool._starts) == 1  # one free range: every freed range joined its neighbours


def test_what_the_pool_cannot_place_is_fresh_memory(pool):
    assert pool.take(pool.size + 1) is None
    held = pool.take(pool.size - MIB)
    outside = pretouched.buffer(2 * MIB)  # no room left: a plain array
    inside = pretouched.buffer(MIB)
    assert len(outside) == 2 * MIB and not _within(outside, pool)
    assert _within(inside, pool)
    del held, inside
    gc.collect()
    small = pretouched.buffer(1000)  # small buffers never cut up the pool
    assert len(small) == 1000 and not _within(small, pool) and pool.free_bytes() == pool.size


def _within(a: np.ndarray, pool: TouchedPool) -> bool:
    base = address(np.frombuffer(pool._map, dtype=np.uint8, count=1))
    return base <= address(a) < base + pool.size


def test_no_pool_without_a_size(monkeypatch):
    monkeypatch.setattr(pretouched, "_pool", None)
    assert pretouched.reserve(0) == 0.0 and pretouched._pool is None
    assert len(pretouched.buffer(10)) == 10  # fresh memory, as before
    assert pretouched.reserve(1) >= 0.0 and pretouched._pool is not None and pretouched._pool.size == MIB


def test_a_range_freed_by_a_collection_inside_take_is_filed_by_the_next_call(pool):
    """A garbage collection can run an array's finalizer in the middle of ``take`` (same thread, lock held): the
    range is queued, never filed under the lock's feet, and the pool neither deadlocks nor loses it."""
    cycle = [pool.take(MIB)]
    cycle.append(cycle)  # only the cycle collector frees it
    del cycle
    gc.disable()
    try:
        with pool._lock:  # as if a collection ran inside ``take``
            gc.collect()
            assert len(pool._returned) == 1
    finally:
        gc.enable()
    assert pool.free_bytes() == pool.size and not pool._returned


def test_threads_taking_and_freeing_never_share_a_byte(pool):
    errors = []

    def worker(seed: int) -> None:
        rng = random.Random(seed)
        for _ in range(300):
            b = pool.take(rng.randint(1, 64 * 1024))
            if b is None:
                continue
            b[:] = seed
            if not (b == seed).all():
                errors.append(seed)
            del b

    threads = [threading.Thread(target=worker, args=(s,)) for s in range(1, 7)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    gc.collect()
    assert not errors
    assert pool.free_bytes() == pool.size


def test_index_loads_read_into_the_pool_intact(pool, redis_client, tenant):
    data = np.random.default_rng(5).integers(0, 256, MIB + 7, dtype=np.uint8).tobytes()
    key = Keys(tenant).vector_block("chunks", 0)
    redis_client.set(key, data)
    got = read_value(redis_client, "GET", key)
    assert bytes(got) == data
    snapshots = IndexSnapshots(redis_client, max_bytes=8 * MIB)
    assert snapshots.save(tenant, "walk", "t1", data)
    loaded = snapshots.load(tenant, "walk", "t1")
    assert bytes(loaded) == data
    assert pool.free_bytes() <= pool.size - 2 * (MIB + 7)  # both were placed in the pool
    del got, loaded
    gc.collect()
    assert pool.free_bytes() == pool.size


def test_a_cold_worker_with_the_pool_ranks_as_without_and_gives_the_memory_back(pool, monkeypatch, redis_client,
                                                                                 tenant):
    """A cold process's BM25 indexes, walk graph and vector blocks loaded into the pool rank exactly as built ones,
    and their memory is the pool's again once the process drops them."""
    monkeypatch.setattr(pretouched, "MIN_POOLED", 0)  # this tenant's indexes are a few KB
    _fill(redis_client, tenant)
    built = _rankings(BM25Cache(redis_client, snapshot_bytes=0), tenant)  # built from the rows, in fresh memory
    writer = RedisVectorStore(redis_client)
    writer.upsert(tenant, KIND, ITEMS)
    want = [hits(writer, tenant, q) for q in QUERIES]
    BM25Cache(redis_client).walk(tenant)  # stores the snapshots (built again)
    for kind in ("chunks", "entities"):
        BM25Cache(redis_client)(tenant, kind)
    del writer
    gc.collect()
    assert pool.free_bytes() == pool.size

    cold_cache, cold_vectors = BM25Cache(redis_client), RedisVectorStore(redis_client)
    assert _rankings(cold_cache, tenant) == built and cold_cache.snapshot_loads == 3
    assert [hits(cold_vectors, tenant, q) for q in QUERIES] == want and cold_vectors.rowid_snapshot_loads == 1
    assert pool.free_bytes() < pool.size  # the snapshots and the vector block were read into it
    del cold_cache, cold_vectors
    gc.collect()
    assert pool.free_bytes() == pool.size
