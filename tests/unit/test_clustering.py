"""Hierarchical Leiden clustering, signatures and chunk attachment."""

from __future__ import annotations

import itertools
import random

import pytest

from shared.domain.clustering import attach_chunk_ids, community_signature, hierarchical_leiden
from shared.domain.models import Community, Entity, Relation


def _clique(prefix: str, size: int, weight: float = 1.0) -> list[tuple[str, str, float]]:
    names = [f"{prefix}{i:02d}" for i in range(size)]
    return [(a, b, weight) for a, b in itertools.combinations(names, 2)]


def _two_dense_clusters(size: int = 30, p: float = 0.5, seed: int = 7) -> list[tuple[str, str, float]]:
    """Two random dense clusters (edge probability p) joined by a single bridge edge."""
    rng = random.Random(seed)
    edges = []
    for prefix in ("a", "b"):
        names = [f"{prefix}{i:02d}" for i in range(size)]
        edges += [(x, y, 1.0) for x, y in itertools.combinations(names, 2) if rng.random() < p]
    return [*edges, ("a00", "b00", 1.0)]


def _planted(groups: int = 8, group_size: int = 40, seed: int = 3) -> list[tuple[str, str, float]]:
    rng = random.Random(seed)
    nodes = [f"g{g}-n{i:02d}" for g in range(groups) for i in range(group_size)]
    edges = []
    for x, y in itertools.combinations(nodes, 2):
        same = x.split("-")[0] == y.split("-")[0]
        if rng.random() < (0.25 if same else 0.003):
            edges.append((x, y, rng.choice([1.0, 2.0, 3.0])))
    return edges


def test_empty_graph_gives_empty_result():
    result = hierarchical_leiden([])
    assert result.communities == []
    assert result.levels == {}
    assert hierarchical_leiden([], nodes=[]).communities == []


def test_determinism_and_independence_from_input_order():
    edges = _planted()
    first = hierarchical_leiden(edges, max_cluster_size=10, seed=42)
    again = hierarchical_leiden(edges, max_cluster_size=10, seed=42)
    shuffled = edges[:]
    random.Random(1).shuffle(shuffled)
    flipped = [(b, a, w) for a, b, w in shuffled]
    assert first == again
    assert first == hierarchical_leiden(flipped, max_cluster_size=10, seed=42)


def test_two_dense_clusters_give_two_levels():
    result = hierarchical_leiden(_two_dense_clusters(), max_cluster_size=10)
    assert len(result.levels) >= 2
    top = [c for c in result.communities if c.level == 0]
    assert sorted(len(c.nodes) for c in top) == [30, 30]
    for community in top:  # each dense cluster is one level-0 community
        assert len({n[0] for n in community.nodes}) == 1
        assert community.children


def test_max_cluster_size_honoured_at_deepest_level():
    result = hierarchical_leiden(_planted(), max_cluster_size=10)
    leaves = [c for c in result.communities if not c.children]
    assert max(len(c.nodes) for c in leaves) <= 10
    # every node sits in exactly one leaf
    leaf_nodes = [n for c in leaves for n in c.nodes]
    assert len(leaf_nodes) == len(set(leaf_nodes)) == 320


def test_max_levels_caps_depth():
    result = hierarchical_leiden(_planted(), max_cluster_size=3, max_levels=2)
    assert set(result.levels) <= {0, 1}


def test_ids_levels_parent_child_consistency():
    result = hierarchical_leiden(_planted(), max_cluster_size=10)
    by_id = result.by_id()
    assert len(by_id) == len(result.communities)
    assert result.levels == {
        lvl: sum(1 for c in result.communities if c.level == lvl) for lvl in {c.level for c in result.communities}
    }
    for level, count in result.levels.items():
        ids = [c.id for c in result.communities if c.level == level]
        assert ids == [f"L{level}-{i}" for i in range(count)]
        sizes = [len(by_id[i].nodes) for i in ids]
        assert sizes == sorted(sizes, reverse=True)
    for community in result.communities:
        assert community.nodes == sorted(community.nodes)
        members = set(community.nodes)
        assert all(a < b and a in members and b in members for a, b in community.edges)
        assert community.edges == sorted(community.edges)
        if community.parent is None:
            assert community.level == 0
        else:
            parent = by_id[community.parent]
            assert parent.level == community.level - 1
            assert community.id in parent.children
            assert members <= set(parent.nodes)
        if community.children:
            assert len(community.nodes) > 10
            child_nodes = [n for cid in community.children for n in by_id[cid].nodes]
            assert sorted(child_nodes) == community.nodes  # children partition the parent


def test_internal_edges_are_exactly_the_induced_edges():
    edges = _two_dense_clusters()
    result = hierarchical_leiden(edges, max_cluster_size=10)
    pairs = {tuple(sorted((a, b))) for a, b, _ in edges}
    for community in result.communities:
        members = set(community.nodes)
        expected = sorted(p for p in pairs if p[0] in members and p[1] in members)
        assert community.edges == expected


def test_isolated_nodes_are_singletons_at_level_zero():
    edges = _clique("c", 5)
    result = hierarchical_leiden(edges, nodes=["zz-lonely", "aa-lonely", "c00"], max_cluster_size=10)
    level0 = [c for c in result.communities if c.level == 0]
    assert level0[0].nodes == [f"c{i:02d}" for i in range(5)]
    assert [c.nodes for c in level0[1:]] == [["aa-lonely"], ["zz-lonely"]]
    assert all(c.edges == [] for c in level0[1:])


def test_self_loops_dropped_and_duplicate_edges_merged():
    result = hierarchical_leiden([("a", "a", 1.0), ("a", "b", 1.0), ("b", "a", 2.0)])
    assert [(c.nodes, c.edges) for c in result.communities] == [(["a", "b"], [("a", "b")])]


def test_bad_weights_do_not_crash():
    edges = [(a, b, w) for (a, b, _), w in zip(_clique("x", 6), itertools.cycle([0.0, -1.0, float("nan")]))]
    result = hierarchical_leiden(edges)
    assert sum(len(c.nodes) for c in result.communities if c.level == 0) == 6


def test_leidenalg_backend_also_works_and_unknown_backend_fails():
    result = hierarchical_leiden(_two_dense_clusters(), backend="leidenalg")
    assert sorted(len(c.nodes) for c in result.communities if c.level == 0) == [30, 30]
    with pytest.raises(ValueError):
        hierarchical_leiden([("a", "b", 1.0)], backend="louvain")


def _entities() -> dict[str, Entity]:
    return {
        "a": Entity(name="a", description="A thing.", source_ids=["c1", "c2"]),
        "b": Entity(name="b", description="B thing.", source_ids=["c2", "c3"]),
        "c": Entity(name="c", description="C thing.", source_ids=["c4"]),
    }


def test_signature_changes_with_inputs_only():
    community = Community(id="L0-0", level=0, nodes=["a", "b"], edges=[("a", "b")])
    entities = _entities()
    relations = {("a", "b"): Relation(src="a", tgt="b", description="a knows b")}
    sig = community_signature(community, entities, relations)
    assert sig == community_signature(community, dict(reversed(entities.items())), relations)
    entities["c"] = Entity(name="c", description="changed")  # not a member
    assert sig == community_signature(community, entities, relations)
    entities["a"] = Entity(name="a", description="A changed thing.")
    assert sig != community_signature(community, entities, relations)
    relations[("a", "b")] = Relation(src="a", tgt="b", description="a hates b")
    assert community_signature(community, _entities(), relations) != sig


def test_attach_chunk_ids_and_occurrence():
    communities = [
        Community(id="L0-0", level=0, nodes=["a", "b"]),
        Community(id="L0-1", level=0, nodes=["c", "missing"]),
        Community(id="L1-0", level=1, nodes=["a"]),
    ]
    attach_chunk_ids(communities, _entities())
    assert communities[0].chunk_ids == ["c1", "c2", "c3"]
    assert communities[1].chunk_ids == ["c4"]
    assert communities[0].occurrence == 1.0
    assert communities[1].occurrence == pytest.approx(1 / 3)
    assert communities[2].occurrence == 1.0  # normalised within its own level
