"""Hybrid mode context (LightRAG, seed 004): low-level keywords find entities, high-level keywords
find relations/themes; both retrievals merged and deduplicated under one budget:
max_entity_tokens, max_relation_tokens, and chunks get whatever remains of max_total_tokens after
system prompt + KG context + query + buffer."""

from __future__ import annotations

from collections.abc import Sequence

from shared.models import Relation
from shared.query.budget import BudgetReport, section_caps, total_context_budget
from shared.query.context_common import Sources, fuse_chunk_rankings, order_chunks, sources_section
from shared.query.context_local import (
    assemble,
    entity_section,
    linked_chunks,
    order_entities,
    order_relations,
    relation_section,
)
from shared.query.params import QueryParam
from shared.retrieval.fusion import rrf

RENDER_ORDER = ("entities", "relationships", "sources")


def merge_entity_hits(*lists: Sequence[tuple[str, float]]) -> list[tuple[str, float]]:
    """Deduplicate entity hits from several retrievals (RRF keeps the best joint rank)."""
    return rrf([list(x) for x in lists if x])


def build_hybrid_context(
    reader,
    low_level_hits: Sequence[tuple[str, float]],
    high_level_hits: Sequence[tuple[str, float]],
    param: QueryParam,
    direct_chunks: Sequence[tuple[str, float]] = (),
    system_prompt: str = "",
) -> tuple[str, BudgetReport, Sources]:
    """``low_level_hits``: entity names found for the low-level keywords (local side).
    ``high_level_hits``: entity names found for the high-level keywords (global side): their relations
    are what the themes retrieve. Relations of both sides are merged and deduplicated."""
    names = [n for n, _ in merge_entity_hits(low_level_hits, high_level_hits)][: param.top_k]
    rank = {n: i for i, n in enumerate(names)}
    found = reader.entities(names) if names else {}
    entities = order_entities([found[n] for n in names if n in found], rank)
    rels: list[Relation] = reader.relations_of([e.name for e in entities]) if entities else []
    relations = order_relations(rels)
    linked = linked_chunks(reader, entities, relations)
    ranked = fuse_chunk_rankings(direct_chunks, linked, param.rrf_k)[: 2 * param.chunk_top_k]
    chunk_map = reader.chunks([c for c, _ in ranked]) if ranked else {}
    items = order_chunks(ranked, chunk_map, param.text_order, param.model)

    tb = total_context_budget(param, system_prompt)
    caps = section_caps(param, "hybrid", tb.total)
    scores = dict(low_level_hits) | dict(high_level_hits)
    sections = {
        "entities": entity_section(entities, caps["entities"], scores),
        "relationships": relation_section(relations, caps["relationships"]),
        "sources": sources_section(items, param, caps["sources"]),
    }
    ctx, report, sources = assemble(sections, param, "hybrid", tb, RENDER_ORDER)
    report.notes.append(
        f"chunks got the remainder: {tb.total} - entities - relationships "
        f"(system {tb.system_prompt_tokens}, query {tb.query_tokens}, buffer {param.buffer_tokens} excluded)"
    )
    return ctx, report, sources
