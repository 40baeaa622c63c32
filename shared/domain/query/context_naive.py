"""Naive mode context: hybrid-retrieved chunks, the whole remaining budget for them (best first, until
it is full: see ``shared.domain.query.passages.candidate_count``)."""

from __future__ import annotations

from collections.abc import Sequence

from shared.domain.query.budget import BudgetReport, TotalBudget, total_context_budget
from shared.domain.query.context_common import Sources, order_chunks, sources_section
from shared.domain.query.context_local import assemble
from shared.domain.query.params import QueryParam
from shared.domain.query.passages import candidate_count


def build_naive_context(
    reader,
    chunk_hits: Sequence[tuple[str, float]],
    param: QueryParam,
    system_prompt: str = "",
    *,
    budget: TotalBudget | None = None,
) -> tuple[str, BudgetReport, Sources]:
    """``budget``: the query's resolved budget (the engine's); without it, resolved here from
    ``system_prompt``."""
    ranked = list(chunk_hits)[: candidate_count(param)]
    chunk_map = reader.chunks([c for c, _ in ranked]) if ranked else {}
    items = order_chunks(ranked, chunk_map, param.text_order, param.model)
    tb = budget if budget is not None else total_context_budget(param, system_prompt)
    return assemble({"sources": sources_section(items, param, None)}, param, "naive", tb, ("sources",))
