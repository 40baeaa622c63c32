"""Causal mode context (causal-search context filtering): (k + s) * oversample_scaler extended nodes, their local graph
context, then a network-data section under its own cap (default 8000 tokens) split 40% entities /
40% relationships / 20% text units, essential fields only."""

from __future__ import annotations

from collections.abc import Sequence

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

RENDER_ORDER = ("entities", "relationships", "sources")
SPLIT = {"entities": 0.4, "relationships": 0.4, "sources": 0.2}


def extended_node_count(param: QueryParam) -> int:
    return (param.causal_k + param.causal_s) * param.oversample_scaler


def build_causal_context(
    reader,
    entity_hits: Sequence[tuple[str, float]],
    param: QueryParam,
    direct_chunks: Sequence[tuple[str, float]] = (),
    system_prompt: str = "",
    ranking: Ranking | None = None,
    *,
    budget: TotalBudget | None = None,
) -> tuple[str, BudgetReport, Sources]:
    """``entity_hits`` should hold ``extended_node_count(param)`` nodes (the engine asks for that many).
    ``budget``: the query's resolved budget (the engine's); without it, resolved here from ``system_prompt``."""
    hits = list(entity_hits)[: extended_node_count(param)]
    names = [n for n, _ in hits]
    entities = graph_entities(reader, names, param, ranking)
    limit = RELATIONS_PER_ENTITY * len(entities)
    relations = order_relations(reader.relations_of([e.name for e in entities], limit), limit) if entities else []
    items = source_items(reader, param, entities, relations, direct_chunks, ranking)

    tb = budget if budget is not None else total_context_budget(param, system_prompt)
    caps = section_caps(param, "causal", tb.total)
    network_cap = (min(param.causal_network_tokens, tb.total) if param.budget_split == "evidence"
                   else sum(v or 0 for v in caps.values()))
    tb = tb.capped(network_cap)
    sections = {
        "entities": entity_section(entities, caps["entities"], dict(hits), param.model),
        "relationships": relation_section(relations, caps["relationships"], param.model),
        "sources": sources_section(items, param, caps["sources"], title="TextUnits"),
    }
    ctx, report, sources = assemble(sections, param, "causal", tb, RENDER_ORDER)
    kept = {s.name: s.kept for s in report.sections}
    report.notes.append(
        f"Found {len(hits)} extended nodes: {kept.get('entities', 0)} entities, "
        f"{kept.get('relationships', 0)} relationships, {kept.get('sources', 0)} text units "
        f"(network cap {network_cap}: " + ("evidence split" if param.budget_split == "evidence" else "40/40/20") + ")"
    )
    return ctx, report, sources
