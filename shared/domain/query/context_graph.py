"""Graph mode context: passages ranked by the graph walk (``shared.domain.query.passages.walk_ranking``) fill
the budget, best first; the entities the walk went through (those the question names and the bridges
to the passages it found) take the room the passages leave, within the entity cap."""

from __future__ import annotations

from shared.domain.query.budget import BudgetReport, TotalBudget, graph_caps, total_context_budget
from shared.domain.query.context_common import Sources, order_chunks, sources_section
from shared.domain.query.context_local import assemble, entity_section
from shared.domain.query.params import QueryParam
from shared.domain.query.passages import Ranking

RENDER_ORDER = ("entities", "sources")


def build_graph_context(reader, ranking: Ranking, param: QueryParam, system_prompt: str = "", *,
                        budget: TotalBudget | None = None) -> tuple[str, BudgetReport, Sources]:
    """``budget``: the query's resolved budget (the engine's); without it, resolved here from
    ``system_prompt``."""
    ranked = list(ranking.passages)
    chunk_map = reader.chunks([c for c, _ in ranked]) if ranked else {}
    items = order_chunks(ranked, chunk_map, param.text_order, param.model)
    names = [n for n, _ in ranking.entities[: param.top_k]]
    found = reader.entities(names) if names else {}
    entities = [found[n] for n in names if n in found]
    tb = budget if budget is not None else total_context_budget(param, system_prompt)
    entity_cap, _ = graph_caps(param, tb.total)
    sections = {
        "entities": entity_section(entities, entity_cap, dict(ranking.entities), param.model),
        "sources": sources_section(items, param, None),
    }
    evidence = param.model_copy(update={"budget_split": "evidence"})  # passages first, always
    return assemble(sections, evidence, "graph", tb, RENDER_ORDER)
