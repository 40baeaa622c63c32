"""Extend a stored hierarchical clustering with what one ingestion job added, without re-running Leiden on the
whole graph (pure; the cluster stage decides when this is allowed: ``ClusterSettings.incremental_max_growth``).

* A new entity with an already clustered neighbour joins that neighbour's communities (its community at every
  level): the neighbour whose leaf community the new entity is linked to most heavily (summed edge weights; ties
  by the smaller leaf id). Only neighbours clustered before this job count, so the result does not depend on the
  order new entities are placed in.
* The other new entities (linked only to each other, or to nothing) are clustered among themselves by
  :func:`hierarchical_leiden`, with the stored settings; their communities get ids after the stored ones of each
  level.
* A changed edge whose two ends share a community is filed in it (``Community.edges``), and every community a
  new or changed entity or a changed edge lies in is *touched*: its chunk ids, occurrence and signature are
  recomputed by the caller and its report is planned again (unchanged signatures still reuse theirs).

Membership never shrinks here: removals take the whole-graph path.
"""

from __future__ import annotations

from bisect import insort
from collections.abc import Iterable, Sequence

from pydantic import BaseModel

from shared.domain.clustering import hierarchical_leiden
from shared.domain.models import Community


class Extension(BaseModel):
    touched: dict[str, Community] = {}  # new and changed communities, by id
    chains: dict[str, list[str]] = {}  # new entity -> its community ids, top level first (the node index rows)
    levels: dict[int, int] = {}  # level -> number of communities (ids are L{level}-{0..n-1})
    # stored community id -> the members (names) and links (sorted pairs) it gained, the rest of it being as stored
    gained: dict[str, set[str | tuple[str, str]]] = {}


def _attach(new: list[str], chains: dict[str, list[str]], edges: Sequence[tuple[str, str, float]]
            ) -> tuple[dict[str, list[str]], list[tuple[str, str, float]]]:
    """(new entity -> the chain it joins, for those with a clustered neighbour; the edges between new entities)."""
    new_set = set(new)
    weights: dict[str, dict[str, float]] = {}  # new entity -> leaf id -> summed weight to that leaf's members
    via: dict[tuple[str, str], str] = {}  # (new entity, leaf) -> the clustered neighbour whose chain it takes
    inner: list[tuple[str, str, float]] = []
    for a, b, w in edges:
        if a == b:
            continue
        for x, y in ((a, b), (b, a)):
            if x in new_set and y in chains:
                leaf = chains[y][-1]
                by_leaf = weights.setdefault(x, {})
                by_leaf[leaf] = by_leaf.get(leaf, 0.0) + w
                via[(x, leaf)] = min(via.get((x, leaf), y), y)
        if a in new_set and b in new_set:
            inner.append((a, b, w))
    placed = {}
    for name in new:
        if name in weights:
            leaf = min(weights[name].items(), key=lambda kv: (-kv[1], kv[0]))[0]
            placed[name] = list(chains[via[(name, leaf)]])
    return placed, inner


def _cluster_rest(rest: list[str], inner: list[tuple[str, str, float]], levels: dict[int, int], **leiden
                  ) -> list[Community]:
    """Communities of the new entities with no clustered neighbour, numbered after the stored ones of each level
    (``levels`` is advanced)."""
    keep = set(rest)
    fresh = hierarchical_leiden([e for e in inner if e[0] in keep and e[1] in keep], rest, **leiden)
    renamed = {c.id: f"L{c.level}-{levels.get(c.level, 0) + int(c.id.split('-', 1)[1])}" for c in fresh.communities}
    for level, count in fresh.levels.items():
        levels[level] = levels.get(level, 0) + count
    for c in fresh.communities:
        c.id = renamed[c.id]
        c.parent = renamed[c.parent] if c.parent else None
        c.children = [renamed[x] for x in c.children]
    return fresh.communities


def _file_edges(edges: Sequence[tuple[str, str, float]], chains: dict[str, list[str]],
                communities: dict[str, Community], touched: dict[str, Community],
                gained: dict[str, set[str | tuple[str, str]]]) -> None:
    """File each edge in the communities holding both its ends (as a sorted pair, kept in order); they are touched,
    and a stored one gains the pairs it did not hold."""
    filed: dict[str, set[tuple[str, str]]] = {}  # community id -> its edges, as sorted pairs
    for a, b, _w in edges:
        if a == b or a not in chains or b not in chains:
            continue
        pair = (a, b) if a < b else (b, a)
        for cid in set(chains[a]).intersection(chains[b]):
            community = touched[cid] if cid in touched else touched.setdefault(cid, communities[cid])
            if cid not in filed:
                community.edges = [(x, y) for x, y in community.edges]
                filed[cid] = set(community.edges)
            if pair not in filed[cid]:
                filed[cid].add(pair)
                insort(community.edges, pair)
                if cid in communities:
                    gained.setdefault(cid, set()).add(pair)


def extend_clustering(
    communities: dict[str, Community],
    chains: dict[str, list[str]],
    new_nodes: Iterable[str],
    changed_nodes: Iterable[str],
    edges: Sequence[tuple[str, str, float]],
    levels: dict[int, int],
    *,
    max_cluster_size: int = 10,
    seed: int = 0xDEADBEEF,
    max_levels: int = 6,
) -> Extension:
    """``communities``: the stored communities named in ``chains`` (modified in place; pass copies);
    ``chains``: clustered entity -> its community ids, top level first, for every clustered end of ``edges`` and
    every changed node; ``new_nodes``: entities to place (clustered by no community yet); ``edges``: the job's new
    and changed edges (ends neither clustered nor new are ignored)."""
    new = sorted(set(new_nodes) - set(chains))
    placed, inner = _attach(new, chains, edges)
    levels = dict(levels)
    touched: dict[str, Community] = {}
    gained: dict[str, set[str | tuple[str, str]]] = {}
    for name, chain in placed.items():  # members kept in name order, as Leiden's communities list them
        for cid in chain:
            insort(touched.setdefault(cid, communities[cid]).nodes, name)
            gained.setdefault(cid, set()).add(name)
    rest = [n for n in new if n not in placed]
    if rest:
        for c in _cluster_rest(rest, inner, levels, max_cluster_size=max_cluster_size, seed=seed,
                               max_levels=max_levels):
            touched[c.id] = c
            for n in c.nodes:
                placed.setdefault(n, []).append(c.id)
    for name in changed_nodes:
        for cid in chains.get(name, ()):
            touched.setdefault(cid, communities[cid])
    _file_edges(edges, {**chains, **placed}, communities, touched, gained)
    return Extension(touched=touched, chains=placed, levels=levels, gained=gained)
