"""A query's reads around hub entities: the heaviest relations of the entities it names, and BM25's best ids."""

from __future__ import annotations

import numpy as np
import pytest

from shared.domain.models import Relation
from shared.domain.retrieval.bm25 import BM25Index, top_positive
from shared.domain.retrieval.edge_index import EdgeIndex
from shared.infra.redis.keys import Keys
from shared.infra.store import index_codec, redis_graph
from shared.infra.store.graph_edges import write_edges
from shared.infra.store.index_snapshots import IndexSnapshots
from shared.infra.store.redis_extractions import rel_field
from shared.infra.store.redis_graph import GraphStore, row_json


def _write(store: GraphStore, relations: list[Relation]) -> None:
    """Relation rows and their edge weights, then a new graph version (what a merge writes)."""
    pipe = store.redis.pipeline(transaction=True)
    for r in relations:
        pipe.hset(store.k.relations(), rel_field(r.src, r.tgt), row_json(r))
    write_edges(pipe, store.k, {rel_field(r.src, r.tgt): r.weight for r in relations})
    store._bump(pipe)
    pipe.execute()


def _heaviest(relations: list[Relation], names: set[str], limit: int) -> list[tuple[str, str]]:
    """What ``relations_of`` must return: the relations of ``names`` by weight, then pair; the first ``limit``."""
    pairs = {tuple(sorted((r.src, r.tgt))): r.weight for r in relations if {r.src, r.tgt} & names}
    return sorted(pairs, key=lambda p: (-pairs[p], p))[:limit]


def test_relations_of_returns_the_heaviest_relations_of_the_names_heaviest_first(redis_client, tenant):
    """A hub with many relations (weights repeating, so ties are broken by the pair), a second name sharing an
    edge with it: the heaviest ``limit`` of the union, each once, heaviest first; all of them without a limit;
    and after a write, the new heaviest relation (the per-version order is not kept past the version)."""
    store = GraphStore(redis_client, tenant)
    relations = [Relation(src="HUB", tgt=f"N{i:03d}", weight=float(i % 7)) for i in range(300)]
    relations += [Relation(src="X", tgt="HUB", weight=5.0), Relation(src="X", tgt="Y", weight=6.0),
                  Relation(src="Z", tgt="X", weight=0.5), Relation(src="P", tgt="Q", weight=99.0)]
    _write(store, relations)

    for names, limit in ((["HUB", "X"], 12), (["X"], 2), (["HUB"], 1), (["X", "nobody"], 10), (["HUB", "X"], 0)):
        got = [tuple(sorted((r.src, r.tgt))) for r in store.relations_of(names, limit)]
        assert got == _heaviest(relations, set(names), limit), (names, limit)
    assert len(store.relations_of(["HUB", "X"])) == 303  # no limit: every relation of the names, each once

    _write(store, [Relation(src="N005", tgt="HUB", weight=50.0)])
    assert [(r.src, r.tgt) for r in store.relations_of(["HUB"], 1)] == [("N005", "HUB")]
    assert store.relations_of(["HUB"], 1)[0].weight == 50.0


def test_a_cold_process_loads_the_neighbour_lists_from_their_snapshot_and_ranks_the_same(redis_client, tenant,
                                                                                         monkeypatch):
    """The first process builds the lists from the edges and stores their snapshot; a cold one (its per-process
    cache empty) loads it without reading a single edge, and answers every question the same; after a write the
    snapshot is stale and the lists are built again. The arrays rank a hub's relations as a sort by (-weight,
    pair) does, a relation of an entity with itself included."""
    relations = [Relation(src="HUB", tgt=f"N{i:03d}", weight=float(i % 7)) for i in range(300)]
    relations += [Relation(src="X", tgt="HUB", weight=5.0), Relation(src="X", tgt="Y", weight=6.0),
                  Relation(src="X", tgt="X", weight=2.0), Relation(src="P", tgt="Q", weight=99.0)]
    snapshots = IndexSnapshots(redis_client, 2**30)
    store = GraphStore(redis_client, tenant, snapshots=snapshots)
    _write(store, relations)
    questions = [(["HUB", "X"], 12), (["X"], 3), (["HUB"], 1), (["nobody"], 5), (["HUB", "X"], None)]

    def answers(s: GraphStore) -> list:
        return [[(r.src, r.tgt) for r in s.relations_of(n, lim)] for n, lim in questions] + [s.neighbors(["X"])]

    first = answers(store)
    assert redis_client.hget(Keys(tenant).index_snapshot("edges"), "tag")
    monkeypatch.setattr(redis_graph, "_ADJACENCY", type(redis_graph._ADJACENCY)(4))  # a fresh process
    monkeypatch.setattr(GraphStore, "edge_list", lambda self: pytest.fail("the edges were read"))
    assert answers(GraphStore(redis_client, tenant, snapshots=snapshots)) == first
    assert first[1] == [("X", "Y"), ("X", "HUB"), ("X", "X")] and first[4] and set(first[5]["X"]) == {"HUB", "Y", "X"}
    monkeypatch.undo()
    _write(store, [Relation(src="N005", tgt="HUB", weight=50.0)])
    assert [(r.src, r.tgt) for r in GraphStore(redis_client, tenant, snapshots=snapshots).relations_of(["HUB"], 1)
            ] == [("N005", "HUB")]
    edges = EdgeIndex.build([(r.src, r.tgt, r.weight) for r in relations])
    assert edges.ranked("X") == sorted((-w, tuple(sorted(("X", b)))) for b, w in (("HUB", 5.0), ("Y", 6.0), ("X", 2.0)))
    back = index_codec.edges_from_bytes(index_codec.edges_to_bytes(edges))
    assert all(back.ranked(n) == edges.ranked(n) for n in edges.names)
    damaged = index_codec.unpack(index_codec.edges_to_bytes(edges))
    damaged["neighbours"] = damaged["neighbours"] + len(edges.names)
    with pytest.raises(ValueError):
        index_codec.edges_from_bytes(index_codec.pack(damaged))


def test_bm25_query_returns_the_best_positive_ids_highest_first_ties_in_corpus_order():
    """Many documents tie on a score (and more score than ``top_k``): the ones first in the corpus are kept."""
    docs = [(f"d{i:02d}", "kerosene barrel" if i % 3 == 0 else "kerosene" if i % 3 == 1 else "nothing here")
            for i in range(60)]
    idx = BM25Index.build(docs)
    scores = idx.scores("kerosene barrel")
    expected = [(docs[i][0], float(scores[i])) for i in np.argsort(-scores, kind="stable") if scores[i] > 0]
    for k in (1, 5, 20, 25, 39, 40, 41, 100):
        assert idx.query("kerosene barrel", k) == expected[:k]
    assert [int(i) for i in top_positive(np.array([0.0, 2.0, -1.0, 2.0, 1.0], dtype=np.float32), 2)] == [1, 3]
    assert top_positive(np.zeros(4, dtype=np.float32), 3).size == 0
