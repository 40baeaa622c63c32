"""Fusing ranked lists: standardised score fusion (the default), reciprocal-rank fusion, and weighted
min-max score fusion.

Why standardised (z-score) fusion is the default: a convex combination of normalised scores keeps how
*far apart* a list puts its items, where RRF keeps only their order. With RRF at k=60 a passage that
BM25 ranks first by a wide margin and the vector list ranks 60th ends up below items both lists rank
mid-way, so a weak list drags a strong one down (docs/benchmarks.md, "Retrieval quality under a token
budget"). A
z-score puts both lists on one scale (mean 0, unit spread over the candidates each returned), so a
list whose scores barely separate anything moves the fused order little. Bruch et al. 2023, "An
Analysis of Fusion Functions for Hybrid Retrieval", find convex combination of normalised scores at
least as good as RRF and robust to its weight. An item one list did not return scores that list's
lowest z-score (it ranked below everything the list returned).
"""

from __future__ import annotations

from collections.abc import Sequence

Ranked = Sequence[tuple[str, float]]


def rrf(lists: Sequence[Ranked], weights: Sequence[float] | None = None, k: int = 60) -> list[tuple[str, float]]:
    """Weighted reciprocal-rank fusion: score(id) = sum_i w_i / (k + rank_i(id)), rank from 1."""
    weights = list(weights) if weights is not None else [1.0] * len(lists)
    fused: dict[str, float] = {}
    first_seen: dict[str, int] = {}
    for w, ranked in zip(weights, lists, strict=True):
        for rank, (item, _score) in enumerate(ranked, start=1):
            fused[item] = fused.get(item, 0.0) + w / (k + rank)
            first_seen.setdefault(item, len(first_seen))
    return sorted(fused.items(), key=lambda kv: (-kv[1], first_seen[kv[0]]))


def _minmax(ranked: Ranked) -> dict[str, float]:
    if not ranked:
        return {}
    vals = [s for _, s in ranked]
    lo, hi = min(vals), max(vals)
    if hi - lo < 1e-12:
        return {i: 1.0 for i, _ in ranked}
    return {i: (s - lo) / (hi - lo) for i, s in ranked}


def weighted(lists: Sequence[Ranked], weights: Sequence[float]) -> list[tuple[str, float]]:
    """sum_i w_i * minmax_i(score); an id missing from a list scores 0 there."""
    fused: dict[str, float] = {}
    first_seen: dict[str, int] = {}
    for w, ranked in zip(weights, lists, strict=True):
        for item, s in _minmax(ranked).items():
            fused[item] = fused.get(item, 0.0) + w * s
            first_seen.setdefault(item, len(first_seen))
    return sorted(fused.items(), key=lambda kv: (-kv[1], first_seen[kv[0]]))


def _zscores(ranked: Ranked) -> tuple[dict[str, float], float]:
    """(id -> standardised score, the floor for ids the list did not return)."""
    if not ranked:
        return {}, 0.0
    vals = [float(s) for _, s in ranked]
    mean = sum(vals) / len(vals)
    sd = (sum((v - mean) ** 2 for v in vals) / len(vals)) ** 0.5
    if sd < 1e-12:
        return {i: 0.0 for i, _ in ranked}, 0.0
    z = {i: (float(s) - mean) / sd for i, s in ranked}
    return z, min(z.values())


def zscore(lists: Sequence[Ranked], weights: Sequence[float]) -> list[tuple[str, float]]:
    """sum_i w_i * z_i(score); an id missing from list i gets list i's lowest z-score."""
    tables = [_zscores(r) for r in lists]
    first_seen: dict[str, int] = {}
    for ranked in lists:
        for item, _ in ranked:
            first_seen.setdefault(item, len(first_seen))
    fused = {item: sum(w * z.get(item, floor) for w, (z, floor) in zip(weights, tables, strict=True) if z)
             for item in first_seen}
    return sorted(fused.items(), key=lambda kv: (-kv[1], first_seen[kv[0]]))


def fuse(
    keyword: Ranked, vector: Ranked, bm25_weight: float = 0.5, method: str = "zscore", k: int = 60
) -> list[tuple[str, float]]:
    """Fuse BM25 and vector rankings; ``bm25_weight`` in [0, 1] is the keyword share."""
    w = (bm25_weight, 1.0 - bm25_weight)
    if method == "weighted":
        return weighted([keyword, vector], w)
    if method == "zscore":
        return zscore([keyword, vector], w)
    return rrf([keyword, vector], w, k)
