"""Neighbour lists that follow the tenant's graph without reading every edge again: ``EdgeIndex.updated`` against
a fresh build, the change log the edge writes keep (``graph_edges``), and a query worker's lists taking a later
version's changes from it (``GraphStore._graph_index``), or reading every edge when the log no longer reaches back."""

from __future__ import annotations

import random

import numpy as np

from shared.domain.retrieval.edge_index import EdgeIndex
from shared.infra.store import change_log, redis_graph
from shared.infra.store.graph_edges import edge_changes, write_edges
from shared.infra.store.redis_extractions import rel_field
from shared.infra.store.redis_graph import GraphStore


def _same(a: EdgeIndex, b: EdgeIndex) -> None:
    assert list(a.names) == list(b.names)
    for name in ("indptr", "neighbours", "weights"):
        assert np.array_equal(getattr(a, name), getattr(b, name)), name


def test_an_updated_index_is_the_fresh_build_of_the_relations_it_holds():
    rng = random.Random(1)
    names = [f"N{i}" for i in range(50)]

    def pair() -> tuple[str, str]:
        a, b = rng.sample(names, 2) if rng.random() > 0.05 else [rng.choice(names)] * 2  # a few with itself
        return (a, b) if rng.random() < 0.5 else (b, a)  # either order

    edges = {tuple(sorted(pair())): float(rng.randint(1, 9)) for _ in range(120)}
    index = EdgeIndex.build([(a, b, w) for (a, b), w in edges.items()])
    for step in range(30):
        changes: dict[tuple[str, str], float | None] = {}
        for _ in range(rng.randint(0, 15)):
            p = rng.choice(list(edges)) if edges and rng.random() < 0.5 else pair()
            if rng.random() < 0.3:
                p = (f"NEW{step}-{rng.randint(0, 3)}", p[1])  # a name the index has not held
            changes[p] = None if rng.random() < 0.35 else float(rng.randint(1, 9))  # gone (held or not) or weighed
        for p, w in changes.items():
            if w is None:
                edges.pop(tuple(sorted(p)), None)
            else:
                edges[tuple(sorted(p))] = w
        index = index.updated(changes)
        _same(index, EdgeIndex.build([(a, b, w) for (a, b), w in edges.items()]))


def _write(store: GraphStore, weights: dict[tuple[str, str], float | None]) -> None:
    """Edge writes and a new graph version, in one transaction (as a merge writes them)."""
    pipe = store.redis.pipeline(transaction=True)
    write_edges(pipe, store.k, {rel_field(a, b): w for (a, b), w in weights.items()})
    store._bump(pipe)
    pipe.execute()


def _fresh_process(monkeypatch) -> None:
    monkeypatch.setattr(redis_graph, "_ADJACENCY", type(redis_graph._ADJACENCY)(4))


def test_a_later_version_takes_only_the_logged_changes(redis_client, tenant, monkeypatch):
    _fresh_process(monkeypatch)
    store = GraphStore(redis_client, tenant)
    _write(store, {("A", f"N{i}"): float(i % 5 + 1) for i in range(40)})
    reads = []
    edge_list = GraphStore.edge_list
    monkeypatch.setattr(GraphStore, "edge_list", lambda self: reads.append(1) or edge_list(self))
    first = store.adjacency()
    assert reads == [1]

    logged = int(redis_client.get(store.k.edge_logged()))
    _write(store, {("A", "N1"): 9.0, ("A", "N2"): None, ("B", "C"): 1.0, ("A", "N3"): 4.0})  # N3 keeps its weight
    assert int(redis_client.get(store.k.edge_logged())) == logged + 3  # an unchanged weight is not logged
    _, changes = edge_changes(redis_client, store.k, logged)
    assert changes == {("A", "N1"): 9.0, ("A", "N2"): None, ("B", "C"): 1.0}
    later = store.adjacency()
    assert reads == [1] and later is not first  # no edge read again
    _same(later, EdgeIndex.build(edge_list(store)))
    assert later.neighbours_of("A")[0] == "N1" and "N2" not in later.neighbours_of("A")

    _fresh_process(monkeypatch)  # a process with no lists of its own reads every edge
    _same(GraphStore(redis_client, tenant).adjacency(), later)
    assert reads == [1, 1]


def test_a_reader_the_trimmed_log_no_longer_reaches_reads_every_edge(redis_client, tenant, monkeypatch):
    _fresh_process(monkeypatch)
    monkeypatch.setattr(change_log, "LOG_KEPT", 5)
    store = GraphStore(redis_client, tenant)
    _write(store, {("A", f"N{i}"): 1.0 for i in range(8)})
    assert redis_client.llen(store.k.edge_log()) == 5  # at least 5 kept, or half the edges
    store.adjacency()
    reads = []
    edge_list = GraphStore.edge_list
    monkeypatch.setattr(GraphStore, "edge_list", lambda self: reads.append(1) or edge_list(self))
    _write(store, {("B", f"N{i}"): 2.0 for i in range(12)})  # more changes than the log keeps (half of 20 edges)
    later = store.adjacency()
    assert reads == [1]
    _same(later, EdgeIndex.build(edge_list(store)))
    _write(store, {("B", "N0"): None})
    _same(store.adjacency(), EdgeIndex.build(edge_list(store)))
    assert reads == [1]  # one change: from the log


def test_lists_updated_from_the_log_are_stored_for_a_cold_process(redis_client, tenant, monkeypatch):
    from shared.infra.store.index_snapshots import IndexSnapshots

    _fresh_process(monkeypatch)
    store = GraphStore(redis_client, tenant, snapshots=IndexSnapshots(redis_client, 2**26))
    _write(store, {("A", f"N{i}"): 1.0 for i in range(20)})
    store.adjacency()
    _write(store, {("A", "N0"): 5.0, ("B", "N1"): 1.0})
    reads = []
    edge_list = GraphStore.edge_list
    monkeypatch.setattr(GraphStore, "edge_list", lambda self: reads.append(1) or edge_list(self))
    updated = store.adjacency()  # from the log, and stored as this version's snapshot
    _fresh_process(monkeypatch)
    cold = GraphStore(redis_client, tenant, snapshots=IndexSnapshots(redis_client, 2**26)).adjacency()
    assert reads == []
    _same(cold, updated)
    _same(cold, EdgeIndex.build(edge_list(store)))
