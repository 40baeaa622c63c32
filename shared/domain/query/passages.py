"""Passage candidates for the passage-carrying modes: direct retrieval (BM25 fused with vectors) and the
graph walk that re-ranks them through the passage-entity graph (``shared.domain.retrieval.graph_walk``).

How many candidates: the budget decides. A caller who sets ``chunk_top_k`` gets exactly that cap
(LightRAG's knob); otherwise up to ``candidate_limit`` passages are scored and the packer
takes them, best first, until the context budget is full.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from shared.domain.query.params import QueryParam, ResolvedParam
from shared.domain.retrieval.graph_walk import WalkIndex

WalkProvider = Callable[[str], WalkIndex | None]  # tenant -> the tenant's passage-entity graph


def candidate_count(rp: QueryParam) -> int:
    """``chunk_top_k`` when the caller chose it, else ``candidate_limit`` (the budget cuts)."""
    explicit = set(getattr(rp, "explicit_fields", None) or rp.model_fields_set)
    return rp.chunk_top_k if "chunk_top_k" in explicit else max(rp.chunk_top_k, rp.candidate_limit)


@dataclass
class Ranking:
    """Passages best first, entity scores from the same walk (empty without one), and what seeded it."""

    passages: list[tuple[str, float]]
    entities: list[tuple[str, float]] = field(default_factory=list)
    details: dict = field(default_factory=dict)


def walk_ranking(rp: ResolvedParam, walk: WalkIndex | None, query: str,
                 entity_hits: Sequence[tuple[str, float]], direct: Sequence[tuple[str, float]],
                 limit: int) -> Ranking:
    """Passages ranked by a personalized PageRank seeded with the entities the query names, the best
    ``walk_entity_seeds`` entity hits and the best ``walk_passage_seeds`` direct passages. Direct
    candidates the walk did not reach follow, so the budget is always filled. Without a graph (or with
    ``graph_walk`` off) the direct ranking is returned unchanged."""
    direct = list(direct)
    if walk is None or not len(walk) or not rp.graph_walk:
        return Ranking(direct[:limit], details={"walk": None})
    named = walk.named_entities(query)
    seeds = list(dict.fromkeys([n for n, _ in named] + [n for n, _ in entity_hits[: rp.walk_entity_seeds]]))
    scores = dict(entity_hits) | dict(named)
    result = walk.walk([(n, scores.get(n, 0.0)) for n in seeds], direct[: rp.walk_passage_seeds],
                       limit, rp.walk_passage_share, rp.walk_damping)
    ranked = list(result.passages)
    seen = {p for p, _ in ranked}
    ranked += [(p, 0.0) for p, _ in direct if p not in seen]
    details = {"walk": {"named_entities": [n for n, _ in named], "entity_seeds": result.entity_seeds,
                        "passage_seeds": result.passage_seeds, "reached": len(result.passages)}}
    return Ranking(ranked[:limit], result.entities, details)
