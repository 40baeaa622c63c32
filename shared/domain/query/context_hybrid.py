"""Hybrid mode context, with LightRAG-style caps (entities, relations, then chunks get the rest): low-level
keywords find entities, high-level keywords find relations/themes; both retrievals merged and deduplicated
under one budget: max_entity_tokens, max_relation_tokens, and chunks get whatever remains of max_total_tokens
after system prompt + KG context + query + buffer."""

from __future__ import annotations

from collections.abc import Sequence

from shared.domain.models import Relation
from shared.domain.query.budget import BudgetReport, TotalBudget, section_caps, total_context_budget
from shared.domain.query.context_common import Sources, sources_section
from shared.domain.query.context_local import (
    RELATIONS_PER_ENTITY,
    assemble,
    entity_section,
    graph_entities,
    order_relations,
    relation_section,
    source_items,
)
from shared.domain.query.params import QueryParam
from shared.domain.query.passages import Ranking
from shared.domain.retrieval.fusion import rrf

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
    ranking: Ranking | None = None,
    *,
    budget: TotalBudget | None = None,
) -> tuple[str, BudgetReport, Sources]:
    """``low_level_hits``: entity names found for the low-level keywords (local side).
    ``high_level_hits``: entity names found for the high-level keywords (global side): their relations
    are what the themes retrieve. Relations of both sides are merged and deduplicated.
    ``budget``: the query's resolved budget (the engine's); without it, resolved here from ``system_prompt``."""
    names = [n for n, _ in merge_entity_hits(low_level_hits, high_level_hits)][: param.top_k]
    entities = graph_entities(reader, names, param, ranking)
    limit = RELATIONS_PER_ENTITY * len(entities)
    rels: list[Relation] = reader.relations_of([e.name for e in entities], limit) if entities else []
    relations = order_relations(rels, limit)
    items = source_items(reader, param, entities, relations, direct_chunks, ranking)

    tb = budget if budget is not None else total_context_budget(param, system_prompt)
    caps = section_caps(param, "hybrid", tb.total)
    scores = dict(low_level_hits) | dict(high_level_hits)
    sections = {
        "entities": entity_section(entities, caps["entities"], scores, param.model),
        "relationships": relation_section(relations, caps["relationships"], param.model),
        "sources": sources_section(items, param, caps["sources"]),
    }
    ctx, report, sources = assemble(sections, param, "hybrid", tb, RENDER_ORDER)
    if param.budget_split == "fixed":
        report.notes.append(
            f"chunks got the remainder: {tb.total} - entities - relationships "
            f"(system {tb.system_prompt_tokens}, query {tb.query_tokens}, buffer {tb.buffer_tokens} excluded)"
        )
    return ctx, report, sources
