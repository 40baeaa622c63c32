"""Fusing ranked lists: reciprocal-rank fusion and weighted (min-max normalised) score fusion."""

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


def fuse(
    keyword: Ranked, vector: Ranked, bm25_weight: float = 0.5, method: str = "rrf", k: int = 60
) -> list[tuple[str, float]]:
    """Fuse BM25 and vector rankings; ``bm25_weight`` in [0, 1] is the keyword share."""
    w = (bm25_weight, 1.0 - bm25_weight)
    if method == "weighted":
        return weighted([keyword, vector], w)
    return rrf([keyword, vector], w, k)
