"""A user's query is not held up by an index rebuild (``shared.infra.store.stale_reads``): inside ``serving_stale``
a cache whose index is being rebuilt for a newer version serves the one it holds once the wait is over, and the
rebuild goes on behind it; never across a tenant deleted and rebuilt, never to a build, never outside."""

from __future__ import annotations

import threading
import time

import pytest

from shared.domain.models import Chunk, Community, CommunityReport
from shared.domain.storage import VectorItem
from shared.infra.redis.keys import Keys
from shared.infra.store import redis_communities, redis_graph
from shared.infra.store.bm25_cache import BM25Cache
from shared.infra.store.graph_edges import write_edges
from shared.infra.store.lru import LRU
from shared.infra.store.redis_extractions import rel_field
from shared.infra.store.redis_graph import GraphStore
from shared.infra.store.redis_vectors import RedisVectorStore
from shared.infra.store.stale_reads import may_stand, serving_stale, stale_after

WAIT = 10.0  # the longest any step of these tests may take: a test that breaks fails, it never hangs


class Gate:
    """A build that waits for ``open()``, counting how often it ran."""

    def __init__(self, value):
        self.value, self.runs, self.started = value, 0, threading.Event()
        self._open = threading.Event()

    def __call__(self):
        self.runs += 1
        self.started.set()
        assert self._open.wait(WAIT)
        return self.value

    def open(self) -> None:
        self._open.set()


def _in_thread(fn) -> tuple[threading.Thread, list]:
    out: list = []
    thread = threading.Thread(target=lambda: out.append(fn()), daemon=True)
    thread.start()
    return thread, out


def test_a_reader_that_may_be_served_the_held_value_gets_it_while_one_rebuild_runs_behind():
    cache: LRU[str, tuple[int, str]] = LRU(4)
    cache.put("t", (1, "v1"))
    gate = Gate((2, "v2"))
    fresh = lambda hit: hit[0] == 2  # noqa: E731
    started = time.monotonic()
    assert cache.get_or_build("t", fresh, gate, stale_after=0.05) == (1, "v1")
    assert cache.get_or_build("t", fresh, gate, stale_after=0.05) == (1, "v1")  # joins the rebuild running
    assert time.monotonic() - started < WAIT / 2 and gate.started.wait(WAIT)
    waiting, got = _in_thread(lambda: cache.get_or_build("t", fresh, gate))  # no stale value for this reader
    waiting.join(0.2)
    assert waiting.is_alive() and not got  # it waits for the build
    gate.open()
    waiting.join(WAIT)
    assert got == [(2, "v2")] and cache.get_or_build("t", fresh, gate, stale_after=0.05) == (2, "v2")
    assert gate.runs == 1


def test_a_rebuild_done_within_the_wait_is_what_the_reader_gets():
    cache: LRU[str, tuple[int, str]] = LRU(4)
    cache.put("t", (1, "v1"))
    assert cache.get_or_build("t", lambda hit: hit[0] == 2, lambda: (2, "v2"), stale_after=WAIT) == (2, "v2")


def test_a_held_value_that_may_not_stand_is_never_served():
    cache: LRU[str, tuple[int, str]] = LRU(4)
    cache.put("t", (1, "v1"))
    gate = Gate((2, "v2"))
    reader, got = _in_thread(lambda: cache.get_or_build("t", lambda hit: hit[0] == 2, gate, stale_after=0.01,
                                                        may_stand=lambda hit: False))
    assert gate.started.wait(WAIT)
    reader.join(0.2)
    assert reader.is_alive() and not got
    gate.open()
    reader.join(WAIT)
    assert got == [(2, "v2")]


def test_a_failed_rebuild_leaves_the_held_value_and_the_next_reader_tries_again():
    cache: LRU[str, tuple[int, str]] = LRU(4)
    cache.put("t", (1, "v1"))
    calls = []

    def failing():
        calls.append(1)
        raise RuntimeError("Redis went away")

    assert cache.get_or_build("t", lambda hit: hit[0] == 2, failing, stale_after=WAIT) == (1, "v1")
    assert cache.get_or_build("t", lambda hit: hit[0] == 2, lambda: (2, "v2"), stale_after=WAIT) == (2, "v2")
    assert calls == [1]


def test_a_build_reads_current_versions_even_for_a_reader_that_may_be_served_stale():
    cache: LRU[str, object] = LRU(4)
    cache.put("t", (1, None))
    seen = []
    with serving_stale(0.5):
        assert 0 < stale_after() <= 0.5
        cache.get_or_build("t", lambda hit: hit[0] == 2, lambda: (2, seen.append(stale_after())), stale_after())
        cache.get_or_build("u", lambda hit: True, lambda: (1, seen.append(stale_after())), stale_after())
    assert seen == [None, None] and stale_after() is None


def test_a_query_waits_once_over_all_the_indexes_it_reads():
    caches = [LRU(4), LRU(4)]
    gates = [Gate((2, "new")), Gate((2, "new"))]
    for cache in caches:
        cache.put("t", (1, "held"))
    with serving_stale(0.2):
        assert caches[0].get_or_build("t", lambda hit: hit[0] == 2, gates[0], stale_after()) == (1, "held")
        assert stale_after() == 0.0  # the wait is spent: the next index being rebuilt is served held at once
        assert caches[1].get_or_build("t", lambda hit: hit[0] == 2, gates[1], stale_after()) == (1, "held")
    for gate in gates:
        gate.open()


def test_only_an_earlier_version_of_the_same_graph_may_stand():
    assert may_stand((b"3", b"7", b"e1"), (b"4", b"7", b"e1"))
    assert may_stand((None, b"7", b"e1"), (b"1", b"7", b"e1"))
    assert not may_stand((b"3", b"7", b"e1"), (b"4", b"7", b"e2"))  # the tenant was deleted and rebuilt
    assert not may_stand((b"3", b"7", None), (b"4", b"7", None))  # no epoch: nothing to tell incarnations apart
    assert not may_stand((b"5", b"7", b"e1"), (b"4", b"7", b"e1"))  # a version gone back
    assert not may_stand((b"3", b"e1"), (b"4", b"7", b"e1"))


def _chunks(redis, tenant: str, start: int, n: int) -> None:
    store = GraphStore(redis, tenant)
    store.put_chunks([Chunk(id=f"c{i}", doc_id="d1", index=i, text=f"Passage {i} about heron{i}.", tokens=5)
                      for i in range(start, start + n)])
    pipe = redis.pipeline(transaction=True)
    store._bump(pipe)  # the graph's epoch, as a merge sets it
    pipe.incr(Keys(tenant).vector_version("chunks"))
    pipe.execute()


@pytest.fixture()
def gated_builds(monkeypatch):
    """BM25Cache builds wait for the gate's ``open()``."""
    gate = threading.Event()
    started = threading.Event()
    build = BM25Cache._build

    def gated(self, tenant, kind, former):
        started.set()
        assert gate.wait(WAIT)
        return build(self, tenant, kind, former)

    monkeypatch.setattr(BM25Cache, "_build", gated)
    return gate, started


def test_a_query_during_a_warm_up_is_served_the_index_before_and_then_the_new_one(redis_client, tenant,
                                                                                   gated_builds):
    gate, started = gated_builds
    _chunks(redis_client, tenant, 0, 5)
    cache = BM25Cache(redis_client, capacity=4, snapshot_bytes=0)
    gate.set()
    assert len(cache(tenant, "chunks")) == 5
    gate.clear()
    _chunks(redis_client, tenant, 5, 3)
    warm_up, _ = _in_thread(lambda: cache(tenant, "chunks"))  # the warm-up the batch announced
    assert started.wait(WAIT)
    with serving_stale(0.05):
        held = cache(tenant, "chunks")
    assert len(held) == 5 and held.query("heron6") == []  # the version before: the new passages not yet in
    gate.set()
    warm_up.join(WAIT)
    with serving_stale(0.05):
        now = cache(tenant, "chunks")
    assert len(now) == 8 and [c for c, _ in now.query("heron6")] == ["c6"]


def test_a_tenant_deleted_and_rebuilt_never_meets_its_former_index(redis_client, tenant, gated_builds):
    gate, started = gated_builds
    _chunks(redis_client, tenant, 0, 5)
    cache = BM25Cache(redis_client, capacity=4, snapshot_bytes=0)
    gate.set()
    cache(tenant, "chunks")
    gate.clear()
    for i in range(5):
        GraphStore(redis_client, tenant).delete_chunk(f"c{i}")
    redis_client.delete(Keys(tenant).graph_epoch(), Keys(tenant).graph_version(), Keys(tenant).vector_version("chunks"))
    _chunks(redis_client, tenant, 100, 2)  # a new epoch, its versions counted from 0 again

    def query():
        with serving_stale(0.01):
            return cache(tenant, "chunks")

    reader, got = _in_thread(query)
    assert started.wait(WAIT)
    reader.join(0.2)
    assert reader.is_alive() and not got  # it waits for the rebuild
    gate.set()
    reader.join(WAIT)
    assert sorted(got[0].ids) == ["c100", "c101"]


def test_neighbour_lists_and_vectors_serve_the_version_before_while_they_are_read_again(redis_client, tenant,
                                                                                        monkeypatch):
    monkeypatch.setattr(redis_graph, "_ADJACENCY", type(redis_graph._ADJACENCY)(4))
    store = GraphStore(redis_client, tenant)

    def write(weights: dict[tuple[str, str], float]) -> None:
        pipe = redis_client.pipeline(transaction=True)
        write_edges(pipe, store.k, {rel_field(a, b): w for (a, b), w in weights.items()})
        store._bump(pipe)
        pipe.execute()

    write({("A", "B"): 1.0})
    vectors = RedisVectorStore(redis_client, snapshot_bytes=0)
    vectors.upsert(tenant, "chunks", [VectorItem("c1", [1.0, 0.0])])
    assert store.neighbors(["A"]) == {"A": ["B"]} and len(vectors.search(tenant, "chunks", [0.0, 1.0], 5)) == 1

    gate, started = threading.Event(), threading.Event()
    for cls, name in ((GraphStore, "edge_list"), (RedisVectorStore, "_read_rows")):
        def gated(self, *args, _original=getattr(cls, name), **kwargs):
            started.set()
            assert gate.wait(WAIT)
            return _original(self, *args, **kwargs)

        monkeypatch.setattr(cls, name, gated)
    monkeypatch.setattr(redis_graph, "edge_changes", lambda redis, keys, since: (0, None))  # read every edge
    write({("A", "C"): 2.0})
    vectors.upsert(tenant, "chunks", [VectorItem("c2", [0.0, 1.0])])
    with serving_stale(0.05):
        assert store.neighbors(["A"]) == {"A": ["B"]}
        assert [h.id for h in vectors.search(tenant, "chunks", [0.0, 1.0], 5)] == ["c1"]
    assert started.is_set()
    gate.set()
    for _ in range(int(WAIT / 0.05)):  # the rebuilds behind finish and are stored for the next reader
        with serving_stale(0.05):
            lists, hits = store.neighbors(["A"]), vectors.search(tenant, "chunks", [0.0, 1.0], 5)
        if sorted(lists["A"]) == ["B", "C"] and [h.id for h in hits] == ["c2", "c1"]:
            break
    else:
        pytest.fail(f"the rebuilt lists and vectors never came: {lists}, {[h.id for h in hits]}")


def test_vectors_of_a_tenant_deleted_and_rebuilt_are_read_again_at_the_same_version(redis_client, tenant):
    vectors = RedisVectorStore(redis_client, snapshot_bytes=0)

    def incarnation(item: str) -> None:
        store = GraphStore(redis_client, tenant)
        pipe = redis_client.pipeline(transaction=True)
        store._bump(pipe)  # a new graph epoch when the tenant has none
        pipe.execute()
        vectors.upsert(tenant, "chunks", [VectorItem(item, [1.0, 0.0])])

    incarnation("old")
    assert [h.id for h in vectors.search(tenant, "chunks", [1.0, 0.0], 5)] == ["old"]
    # the tenant deleted: every key of its slot (SCAN visits every node of a Redis Cluster; KEYS asks one)
    redis_client.delete(*redis_client.scan_iter(match=Keys(tenant).p + "*", count=1000))
    incarnation("new")  # its collection's version counts from 0 again: the same number as the one held
    with serving_stale(WAIT):
        assert [h.id for h in vectors.search(tenant, "chunks", [1.0, 0.0], 5)] == ["new"]
    assert [h.id for h in vectors.search(tenant, "chunks", [1.0, 0.0], 5)] == ["new"]


def test_a_global_query_while_reports_are_written_is_served_the_rows_before(redis_client, tenant, monkeypatch):
    monkeypatch.setattr(redis_communities, "_COMMUNITY_ROWS", LRU(4))
    store = GraphStore(redis_client, tenant)
    pipe = redis_client.pipeline(transaction=True)
    store._bump(pipe)  # the graph's epoch, as a merge sets it
    pipe.execute()
    store.replace_communities([Community(id="L0-0", level=0, nodes=["A", "B"])], {0: 1}, 1)
    assert store.community_rows()[1] == {}
    gate, started = threading.Event(), threading.Event()
    read = GraphStore._read_community_rows

    def gated(self):
        started.set()
        assert gate.wait(WAIT)
        return read(self)

    monkeypatch.setattr(GraphStore, "_read_community_rows", gated)
    store.save_reports([CommunityReport(community_id="L0-0", level=0, title="A and B", summary="s")])
    with serving_stale(0.05):
        assert store.community_rows()[1] == {}  # the revision before: its report not yet in
    assert started.is_set()
    gate.set()
    for _ in range(int(WAIT / 0.05)):
        with serving_stale(0.05):
            if store.community_rows()[1]:
                break
    assert store.community_rows()[1]["L0-0"].title == "A and B"

    # the tenant deleted and clustered again under a new epoch: the rows held are never served
    gate.clear()
    redis_client.delete(store.k.graph_epoch(), store.k.community_meta(), store.k.reports())
    pipe = redis_client.pipeline(transaction=True)
    store._bump(pipe)
    pipe.execute()
    store.replace_communities([Community(id="L0-0", level=0, nodes=["C"])], {0: 1}, 1)
    reader, got = _in_thread(lambda: _rows_serving_stale(store))
    reader.join(0.2)
    assert reader.is_alive() and not got  # it waits for the rows of the new epoch
    gate.set()
    reader.join(WAIT)
    assert got[0][0]["L0-0"].nodes == ["C"] and got[0][1] == {}


def _rows_serving_stale(store: GraphStore):
    with serving_stale(0.01):
        return store.community_rows()
