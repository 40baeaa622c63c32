"""Synonym edges between entities (HippoRAG 2's synonymy edges: Gutiérrez et al. 2025, "From RAG to Memory").

Two entities whose *name* vectors are near are often one thing under two surface forms ("ED WOOD" and
"EDWARD D. WOOD JR.", "MOVIE" and "FILM"), and no passage or relation joins them. A synonym edge lets the graph
walk cross from one to the other. Each entity keeps its ``neighbours`` nearest names whose cosine reaches the
threshold; the edge's weight is that cosine. Synonym edges feed the walk only: communities and reports are
built from the extracted relations alone.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from shared.domain.storage import VectorHit


@dataclass(frozen=True)
class SynonymPolicy:
    threshold: float  # cosine of two name vectors at least this: a synonym edge
    neighbours: int = 5  # synonym edges kept per entity at most (its nearest names first)


def name_text(name: str) -> str:
    """What is embedded for an entity's name vector: the name alone (no description: two different people
    described alike must not look like one), title-cased as a name is written in text (stored names are
    upper-case, and an embedding model reads "ED WOOD" as letters rather than as a name)."""
    return name.title()


def synonym_links(name: str, hits: Sequence[VectorHit], policy: SynonymPolicy) -> list[tuple[str, float]]:
    """The names ``hits`` (a name-vector search for ``name``) that count as its synonyms, nearest first."""
    links = [(h.id, round(float(h.score), 4)) for h in hits if h.id != name and h.score >= policy.threshold]
    return sorted(links, key=lambda kv: (-kv[1], kv[0]))[: policy.neighbours]


def synonym_edges(links: Mapping[str, Sequence[tuple[str, float]]]) -> list[tuple[str, str, float]]:
    """Undirected (a, b, cosine) edges from each entity's links: a pair found from both sides is one edge."""
    best: dict[tuple[str, str], float] = {}
    for a, others in links.items():
        for b, score in others:
            if a == b:
                continue
            key = (a, b) if a < b else (b, a)
            best[key] = max(score, best.get(key, 0.0))
    return [(a, b, s) for (a, b), s in sorted(best.items())]
