"""Hierarchical Leiden clustering of the entity graph (pure, igraph + leidenalg).

Leiden runs in igraph's C implementation (``Graph.community_leiden``, modularity objective, two
iterations), faster than ``leidenalg`` on large graphs at the same modularity;
``backend="leidenalg"`` selects ``leidenalg.find_partition`` instead. igraph's RNG is
process-global, so each run installs a seeded ``random.Random`` under a lock and restores it.

Semantics (the ones Microsoft GraphRAG gets from graspologic's ``hierarchical_leiden``):

* Level 0 is a weighted-modularity Leiden partition of the whole graph.
* A level-L community with more than ``max_cluster_size`` members is re-clustered (Leiden on its
  induced subgraph) into level L+1 children. Small communities are *not* repeated at deeper
  levels: level L+1 only holds the sub-communities of the large level-L communities, so a node
  appears once per level down to the level of its smallest (leaf) community.
* A large community that Leiden cannot split (e.g. a clique) stays a leaf, as does any community
  at level ``max_levels - 1``; ``max_cluster_size`` is therefore a target, not a guarantee.
* Isolated nodes (listed in ``nodes`` but in no edge) become singleton communities at level 0;
  they are not grouped, since an arbitrary bag of unrelated entities makes a meaningless report.
* Edges are undirected: (a, b) and (b, a) are merged and their weights summed; self-loops are
  dropped; non-positive or non-finite weights become a tiny positive weight.

Determinism: vertices are numbered in sorted-name order and edges in sorted order, so the result
does not depend on input order; every Leiden run (whole graph or sub-community) uses the same
seed, so a community's split only depends on its own subgraph. Within a level, communities are
numbered by size (descending) then smallest member name: ids are ``"L{level}-{index}"``.
"""

from __future__ import annotations

import hashlib
import random
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager

import igraph as ig
import leidenalg as la
import numpy as np
from pydantic import BaseModel

from shared.domain.models import Community, Entity, Relation

_MIN_WEIGHT = 1e-6
_RNG_LOCK = threading.Lock()
BACKENDS = ("igraph", "leidenalg")


class ClusteringResult(BaseModel):
    communities: list[Community] = []
    levels: dict[int, int] = {}  # level -> number of communities

    def by_id(self) -> dict[str, Community]:
        return {c.id: c for c in self.communities}


def _build_graph(
    edges: Sequence[tuple[str, str, float]], nodes: Iterable[str] | None
) -> tuple[list[str], ig.Graph, np.ndarray, np.ndarray]:
    """Graph over sorted names; returns (names, graph, edge lo index, edge hi index) with lo < hi."""
    srcs: tuple[str, ...] = ()
    tgts: tuple[str, ...] = ()
    weights: tuple[float, ...] = ()
    if edges:
        srcs, tgts, weights = zip(*edges, strict=True)
    names = sorted(set(srcs).union(tgts, nodes or ()))
    n = len(names)
    index = {name: i for i, name in enumerate(names)}
    a = np.fromiter(map(index.__getitem__, srcs), dtype=np.int64, count=len(srcs))
    b = np.fromiter(map(index.__getitem__, tgts), dtype=np.int64, count=len(tgts))
    w = np.asarray(weights, dtype=np.float64)
    w = np.where(np.isfinite(w) & (w > 0), w, _MIN_WEIGHT)
    keep = a != b
    lo, hi, w = np.minimum(a, b)[keep], np.maximum(a, b)[keep], w[keep]
    keys, inverse = np.unique(lo * max(n, 1) + hi, return_inverse=True)
    summed = np.bincount(inverse.ravel(), weights=w, minlength=len(keys))
    lo, hi = keys // max(n, 1), keys % max(n, 1)
    graph = ig.Graph(n=n, edges=list(zip(lo.tolist(), hi.tolist(), strict=True)))  # tuples: igraph reads them faster
    graph.es["weight"] = summed.tolist()
    return names, graph, lo, hi


@contextmanager
def _seeded_igraph(seed: int) -> Iterator[None]:
    """igraph draws from one process-wide RNG: install a seeded one for the call, then restore."""
    with _RNG_LOCK:
        ig.set_random_number_generator(random.Random(seed))
        try:
            yield
        finally:
            ig.set_random_number_generator(random)


def _membership(graph: ig.Graph, seed: int, backend: str) -> list[int]:
    if backend == "leidenalg":
        return la.find_partition(graph, la.ModularityVertexPartition, weights="weight", seed=seed).membership
    with _seeded_igraph(seed):
        return graph.community_leiden(objective_function="modularity", weights="weight", n_iterations=2).membership


def _leiden_groups(graph: ig.Graph, vids: np.ndarray, seed: int, backend: str) -> list[np.ndarray]:
    """Leiden communities of ``graph`` as arrays of (sorted) global vertex ids ``vids[local]``."""
    if graph.vcount() == 0:
        return []
    if graph.ecount() == 0:
        return [vids[i : i + 1] for i in range(len(vids))]
    membership = np.asarray(_membership(graph, seed, backend), dtype=np.int64)
    order = np.argsort(membership, kind="stable")  # stable: members stay in sorted-name order
    bounds = np.flatnonzero(np.diff(membership[order])) + 1
    return [vids[part] for part in np.split(order, bounds)]


def _order(groups: list[tuple[int | None, np.ndarray]]) -> list[tuple[int | None, np.ndarray]]:
    """Size descending, then smallest member (vertex ids follow sorted names)."""
    return sorted(groups, key=lambda g: (-len(g[1]), int(g[1][0])))


def _split_levels(
    graph: ig.Graph, max_cluster_size: int, seed: int, max_levels: int, backend: str
) -> list[list[tuple[int | None, np.ndarray]]]:
    """Per level, the ordered (parent index in previous level, member vertex ids) groups."""
    all_vids = np.arange(graph.vcount(), dtype=np.int64)
    levels = [_order([(None, g) for g in _leiden_groups(graph, all_vids, seed, backend)])]
    while len(levels) < max_levels:
        children: list[tuple[int | None, np.ndarray]] = []
        for parent, (_, vids) in enumerate(levels[-1]):
            if len(vids) <= max_cluster_size:
                continue
            parts = _leiden_groups(graph.induced_subgraph(vids.tolist()), vids, seed, backend)
            if len(parts) > 1:
                children.extend((parent, part) for part in parts)
        if not children:
            break
        levels.append(_order(children))
    return levels


def _level_edges(lo: np.ndarray, hi: np.ndarray, groups: list, n: int) -> list[np.ndarray]:
    """For each group of a level, the indices (into lo/hi) of its internal edges, sorted by (lo, hi)."""
    membership = np.full(n, -1, dtype=np.int64)
    for idx, (_, vids) in enumerate(groups):
        membership[vids] = idx
    cid = membership[lo]
    internal = np.flatnonzero((cid >= 0) & (cid == membership[hi]))
    internal = internal[np.lexsort((hi[internal], lo[internal], cid[internal]))]
    counts = np.bincount(cid[internal], minlength=len(groups))
    return np.split(internal, np.cumsum(counts)[:-1])


def hierarchical_leiden(
    edges: Sequence[tuple[str, str, float]],
    nodes: Iterable[str] | None = None,
    *,
    max_cluster_size: int = 10,
    seed: int = 0xDEADBEEF,
    max_levels: int = 6,
    backend: str = "igraph",
) -> ClusteringResult:
    """Hierarchical communities of an undirected weighted graph (see the module docstring)."""
    if backend not in BACKENDS:
        raise ValueError(f"unknown Leiden backend {backend!r}; expected one of {BACKENDS}")
    names, graph, lo, hi = _build_graph(edges, nodes)
    if not names:
        return ClusteringResult()
    levels = _split_levels(graph, max(1, max_cluster_size), seed % (2**32), max(1, max_levels), backend)
    communities: list[Community] = []
    counts: dict[int, int] = {}
    previous: list[Community] = []
    for level, groups in enumerate(levels):
        current: list[Community] = []
        for (parent, vids), edge_idx in zip(groups, _level_edges(lo, hi, groups, len(names)), strict=True):
            community = Community.model_construct(
                id=f"L{level}-{len(current)}",
                level=level,
                nodes=[names[i] for i in vids.tolist()],
                edges=[(names[a], names[b]) for a, b in zip(lo[edge_idx].tolist(), hi[edge_idx].tolist(), strict=True)],
                chunk_ids=[],
                parent=None if parent is None else previous[parent].id,
                children=[],
                occurrence=0.0,
                signature="",
            )
            if parent is not None:
                previous[parent].children.append(community.id)
            current.append(community)
        communities.extend(current)
        counts[level] = len(current)
        previous = current
    return ClusteringResult(communities=communities, levels=counts)


def find_relation(relations: Mapping[tuple[str, str], Relation], a: str, b: str) -> Relation | None:
    """The relation stored under (a, b) or (b, a)."""
    return relations.get((a, b)) or relations.get((b, a))


def community_signature(
    community: Community,
    entities: Mapping[str, Entity],
    relations: Mapping[tuple[str, str], Relation] | None = None,
) -> str:
    """Content hash of a community's report input: members (name, type, description) and internal
    edges (pair, description, weight). Equal signatures mean the report need not be regenerated."""
    digest = hashlib.blake2b(digest_size=16)
    for name in sorted(community.nodes):
        entity = entities.get(name)
        parts = (name, entity.type, entity.description) if entity else (name, "", "")
        digest.update(("\x1e".join(parts) + "\x1d").encode())
    digest.update(b"\x1c")
    for a, b in sorted(community.edges):
        rel = find_relation(relations or {}, a, b)
        parts = (a, b, rel.description, repr(rel.weight)) if rel else (a, b, "", "")
        digest.update(("\x1e".join(parts) + "\x1d").encode())
    return digest.hexdigest()


def attach_chunk_ids(communities: list[Community], entities: Mapping[str, Entity]) -> list[Community]:
    """Fill ``chunk_ids`` (sorted union of members' source ids) and ``occurrence`` (chunk count
    divided by the largest chunk count in the same level, as nano-graphrag does). In place."""
    best: dict[int, int] = {}
    for community in communities:
        chunks: set[str] = set()
        for name in community.nodes:
            entity = entities.get(name)
            if entity is not None:
                chunks.update(entity.source_ids)
        community.chunk_ids = sorted(chunks)
        best[community.level] = max(best.get(community.level, 0), len(chunks))
    for community in communities:
        top = best[community.level]
        community.occurrence = len(community.chunk_ids) / top if top else 0.0
    return communities
