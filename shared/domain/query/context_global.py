"""Global mode (nano-graphrag global_query / Microsoft GraphRAG global search), pure pieces:
community selection (static or dynamic), map-group planning under the group budget, map
messages, tolerant map-point parsing, and the reduce step under the synthesis budget."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from pydantic import BaseModel

from shared.domain.models import Community, CommunityReport
from shared.domain.packing import csv_row, prefix_fit
from shared.domain.prompts import global_direct, global_map, global_reduce
from shared.domain.query.budget import (
    BudgetReport,
    Section,
    SectionReport,
    fit_section,
    make_report,
    synthesis_budget,
    total_context_budget,
)
from shared.domain.query.context_local import report_text
from shared.domain.query.global_select import RelevanceSelection, select_by_relevance
from shared.domain.query.line_tokens import SECTION_SEPARATOR, joined_tokens
from shared.domain.query.params import QueryParam
from shared.domain.retrieval.bm25 import BM25Index
from shared.domain.tokens import count_tokens, count_tokens_batch, truncate_text

MAP_HEADER = "id,content,rating,importance"
RANKED_HEADER = "id,content"


class MapGroup(BaseModel):
    index: int
    report_ids: list[str]
    context: str
    tokens: int


class DynamicSelection(BaseModel):
    rated: int = 0
    relevant: int = 0
    rating_tokens: int = 0  # report tokens sent to the rater
    static_map_tokens: int = 0  # what the static path would send to map
    dynamic_map_tokens: int = 0
    tokens_saved: int = 0  # static - (dynamic map + rating)
    levels_visited: list[int] = []


class GlobalPlan(BaseModel):
    groups: list[MapGroup]
    selected: list[str]  # community ids in map order
    candidates: int  # communities at level <= query level with a report
    group_budget: int
    budget: BudgetReport
    dynamic: DynamicSelection | None = None
    context_budget: int = 0  # the context-data budget of one call (max_total_tokens / model window)
    selection: RelevanceSelection | None = None


def relevant_groups(plan: GlobalPlan, query: str) -> list[MapGroup]:
    """The map groups by their BM25 relevance to the question (the groups' report tables as documents),
    the plan's order breaking ties: what a caller who asked for the context of *this* question sees first."""
    if len(plan.groups) < 2 or not query.strip() or (plan.selection and plan.selection.strategy == "relevance"):
        return list(plan.groups)  # a relevance selection's groups are already in the order of its ranking
    scores = BM25Index([str(g.index) for g in plan.groups], [g.context for g in plan.groups]).scores(query)
    order = sorted(range(len(plan.groups)), key=lambda i: (-float(scores[i]), i))
    return [plan.groups[i] for i in order]


def visible_context(plan: GlobalPlan, model: str | None, query: str = "") -> tuple[str, int]:
    """The context a caller sees (``only_need_context`` / ``include_context``): whole map groups, the
    ones most relevant to ``query`` first, while together they fit the context budget, so a returned
    context never exceeds it. The map phase itself reads every selected group, one call each, each within
    the budget. Returns (text, groups shown)."""
    shown: list[str] = []
    for group in relevant_groups(plan, query):
        candidate = "\n\n".join([*shown, group.context])
        if shown and count_tokens(candidate, model) > plan.context_budget:
            break
        shown.append(group.context)
    return "\n\n".join(shown), len(shown)


def static_selection(
    communities: dict[str, Community], reports: dict[str, CommunityReport], param: QueryParam
) -> tuple[list[CommunityReport], int]:
    """Level <= query level, by occurrence, top global_max_consider_community, rating >= minimum."""
    eligible = [c for c in communities.values() if c.level <= param.level and c.id in reports]
    eligible.sort(key=lambda c: (-c.occurrence, c.id))
    top = eligible[: param.global_max_consider_community]
    chosen = [reports[c.id] for c in top if reports[c.id].rating >= param.global_min_community_rating]
    return chosen, len(eligible)


def dynamic_selection(
    communities: dict[str, Community], reports: dict[str, CommunityReport], param: QueryParam,
    rate: Callable[[CommunityReport], float], model: str | None = None,
) -> tuple[list[CommunityReport], DynamicSelection]:
    """Rate reports from the roots down; only a relevant report's children are rated (MS GraphRAG).
    When nothing at a level is relevant, the next level is tried as a whole."""
    stats = DynamicSelection()
    by_level: dict[int, list[Community]] = {}
    for c in communities.values():
        if c.id in reports and c.level <= param.level:
            by_level.setdefault(c.level, []).append(c)
    if not by_level:
        return [], stats
    levels = sorted(by_level)
    queue = [c for c in by_level[levels[0]] if not c.parent or c.parent not in communities] or by_level[levels[0]]
    relevant: dict[str, Community] = {}
    while queue:
        stats.levels_visited.append(queue[0].level)
        nxt: list[Community] = []
        for c in sorted(queue, key=lambda c: c.id):
            rep = reports[c.id]
            stats.rated += 1
            stats.rating_tokens += count_tokens(report_text(rep), model)
            if rate(rep) < param.dynamic_threshold:
                continue
            relevant[c.id] = c
            kids = [communities[k] for k in c.children if k in communities and k in reports]
            kids = [k for k in kids if k.level <= param.level]
            nxt.extend(kids)
            if kids and not param.dynamic_keep_parent:
                relevant.pop(c.id, None)
        if not nxt and not relevant:
            later = [lv for lv in levels if lv > queue[0].level]
            nxt = by_level[later[0]] if later else []
        queue = nxt
    chosen = sorted(relevant.values(), key=lambda c: (-c.occurrence, c.id))[: param.global_max_consider_community]
    stats.relevant = len(chosen)
    return [reports[c.id] for c in chosen], stats


def _map_row(report: CommunityReport, communities: dict[str, Community] | None, text: str | None = None) -> str:
    """``id,content,rating,importance`` (importance: the community's occurrence, 0 when unknown), or ``id,content``
    without ``communities`` (the ranked views of the relevance selection)."""
    content = report_text(report) if text is None else text
    if communities is None:
        return csv_row([report.community_id, content])
    occurrence = communities[report.community_id].occurrence if report.community_id in communities else 0
    return csv_row([report.community_id, content, report.rating, occurrence])


def group_reports(
    reports: Sequence[CommunityReport], communities: dict[str, Community], budget: int, model: str | None,
    ranked: bool = False, most: int | None = None,
) -> list[MapGroup]:
    """Consecutive groups whose rendered report table fits ``budget`` (and holds at most ``most`` reports); an
    oversized report is cut (at a token boundary that decodes cleanly) and sent alone. ``ranked``: the reports
    are the relevance selection's views, best first, and their rows leave out rating and importance (the scan's
    order by importance is what those columns tell the map; a ranked view's place already says more)."""
    table = None if ranked else communities
    rows = [_map_row(r, table) for r in reports]
    groups: list[MapGroup] = []
    start = 0
    while start < len(rows):
        end = start + most if most else len(rows)
        sec = Section("reports", rows[start:end], "Reports", RANKED_HEADER if ranked else MAP_HEADER, budget)
        idx, kept, _ = fit_section(sec, budget, model, 1 << 30)
        if not kept:
            r = reports[start]
            overhead = count_tokens(sec.render([_map_row(r, table, "")]), model)
            short = truncate_text(report_text(r), max(0, budget - overhead - 8), model)
            kept = [_map_row(r, table, short)]
            idx = [0]
            if count_tokens(sec.render(kept), model) > budget:
                start += 1
                continue
        text = sec.render(kept)
        ids = [reports[start + i].community_id for i in idx]
        groups.append(MapGroup(index=len(groups), report_ids=ids, context=text, tokens=count_tokens(text, model)))
        start += len(idx)
    return groups


def _strategy(param: QueryParam, full_scan_tokens: int, group_budget: int, rate) -> str:
    if param.dynamic_community_selection or param.global_selection == "dynamic":
        return "dynamic" if rate is not None else "all"
    if param.global_selection == "auto":
        return "all" if full_scan_tokens <= group_budget else "relevance"
    return param.global_selection


def _choose(
    communities: dict[str, Community], reports: dict[str, CommunityReport], param: QueryParam, static, strategy: str,
    rate, anchors, full: int,
) -> tuple[list[CommunityReport], DynamicSelection | None, RelevanceSelection]:
    model = param.model
    sel = RelevanceSelection(strategy=strategy, candidates=len(static), full_scan_tokens=full)
    dyn = None
    if strategy == "dynamic":
        chosen, dyn = dynamic_selection(communities, reports, param, rate, model)
        if param.global_min_community_rating:
            chosen = [r for r in chosen if r.rating >= param.global_min_community_rating]
    elif strategy == "relevance":
        sel.allowance = max(param.global_selection_min_tokens, int(param.global_selection_share * full))
        chosen, sel.relevant, sel.selected_tokens = select_by_relevance(
            param.query, static, anchors, sel.allowance, param.global_report_tokens, model)
    else:
        chosen = static
    sel.read = len(chosen)
    if strategy == "all":
        sel.selected_tokens = full
    elif strategy == "dynamic":
        sel.selected_tokens = sum(count_tokens_batch([report_text(r) for r in chosen], model)) if chosen else 0
    return chosen, dyn, sel


def plan_global(
    communities: dict[str, Community], reports: dict[str, CommunityReport], param: QueryParam,
    rate: Callable[[CommunityReport], float] | None = None, anchors: dict[str, float] | None = None,
) -> GlobalPlan:
    """The map groups: the reports the strategy chose (``global_selection``), in groups within the group budget.
    ``anchors``: community id -> the question's entity hits among its members (``global_select.anchor_scores``)."""
    model = param.model
    static, candidates = static_selection(communities, reports, param)
    map_prompt = global_map.SYSTEM.format(context_data="")
    tb = total_context_budget(param, map_prompt)
    group_budget = min(param.global_group_tokens, tb.total)
    full_scan = sum(count_tokens_batch([report_text(r) for r in static], model)) if static else 0
    strategy = _strategy(param, full_scan, group_budget, rate)
    chosen, dyn, sel = _choose(communities, reports, param, static, strategy, rate, anchors, full_scan)
    ranked = strategy == "relevance"
    if ranked:
        group_budget = min(group_budget, param.global_selected_group_tokens)
    groups = group_reports(chosen, communities, group_budget, model, ranked,
                           param.global_selected_group_reports if ranked else None)
    if dyn is not None:
        dyn.static_map_tokens = sum(g.tokens for g in group_reports(static, communities, group_budget, model))
        dyn.dynamic_map_tokens = sum(g.tokens for g in groups)
        dyn.tokens_saved = dyn.static_map_tokens - dyn.dynamic_map_tokens - dyn.rating_tokens
    return _finish_plan(param, tb, groups, candidates, group_budget, dyn, sel)


def _finish_plan(param: QueryParam, tb, groups: list[MapGroup], candidates: int, group_budget: int,
                 dyn: DynamicSelection | None, sel: RelevanceSelection) -> GlobalPlan:
    kept = sum(len(g.report_ids) for g in groups)
    sec = SectionReport(
        name="reports", candidates=candidates, kept=kept, tokens_used=sum(g.tokens for g in groups),
        tokens_allowed=group_budget * max(1, len(groups)), truncated=kept < candidates,
        cut_by="selection" if kept < candidates else None,
    )
    budget = make_report(param, "global", tb, None)
    budget.total_allowed = group_budget  # per map call: each group's context is one LLM call
    budget.sections = [sec]
    budget.total_tokens = max((g.tokens for g in groups), default=0)
    budget.notes.append(f"{len(groups)} map groups of <= {group_budget} tokens (largest {budget.total_tokens}, "
                        f"{sec.tokens_used} over all groups)")
    if sel.strategy == "relevance":
        budget.notes.append(
            f"relevance selection: the question touches {sel.relevant} of {sel.candidates} reports; the map reads "
            f"{sel.read} (focused views, {sel.selected_tokens} tokens of the {sel.allowance}-token allowance; the "
            f"full scan would read {sel.full_scan_tokens})")
    if dyn is not None:
        budget.notes.append(
            f"dynamic selection rated {dyn.rated}, kept {dyn.relevant}; saved {dyn.tokens_saved} tokens "
            f"vs static ({dyn.static_map_tokens} map tokens)"
        )
    return GlobalPlan(groups=groups, selected=[i for g in groups for i in g.report_ids], candidates=candidates,
                      group_budget=group_budget, budget=budget.finalize(), dynamic=dyn, context_budget=tb.total,
                      selection=sel)


def build_map_messages(group: MapGroup, query: str) -> list[dict]:
    return [
        {"role": "system", "content": global_map.SYSTEM.format(context_data=group.context)},
        {"role": "user", "content": query},
    ]


def build_reduce_messages(report_data: str, query: str, response_type: str) -> list[dict]:
    return _answer_messages(global_reduce.SYSTEM, report_data, query, response_type)


def _answer_messages(template: str, report_data: str, query: str, response_type: str) -> list[dict]:
    """The reduce's or the direct answer's messages: the data and the layout in the system prompt, the question."""
    return [{"role": "system", "content": template.format(response_type=response_type, report_data=report_data)},
            {"role": "user", "content": query}]


POINTS_HEADER = "score,description"


def reduce_points(
    points: Sequence[tuple[int, object]], budget: int, model: str | None = None
) -> tuple[str, SectionReport]:
    """Keep points with score > 0, best first, as a table of ``score,description`` rows within ``budget``.
    ``points``: (analyst/group index, MapPoint). One row per point, not Microsoft GraphRAG's block per point
    (``----Analyst n----`` / ``Importance Score: s``): which analyst found a point tells the reduce nothing its
    score and report references do not, and the block's lines cost ~10 tokens a point (a sizeable share of the
    reduce's input on a large corpus)."""
    useful = [(g, p) for g, p in points if p.score > 0]
    useful.sort(key=lambda gp: -gp[1].score)
    rows = [csv_row([f"{p.score:g}", p.description]) for _g, p in useful]
    head = count_tokens(POINTS_HEADER, model) + 1  # the header and its line break
    kept = rows[: prefix_fit([c + 1 for c in count_tokens_batch(rows, model)], budget - head)]
    while kept and count_tokens("\n".join([POINTS_HEADER, *kept]), model) > budget:
        kept.pop()
    text = "\n".join([POINTS_HEADER, *kept]) if kept else ""
    tokens = count_tokens(text, model) if text else 0
    rep = SectionReport(name="points", candidates=len(points), kept=len(kept), tokens_used=tokens,
                        tokens_allowed=budget, truncated=len(kept) < len(useful),
                        cut_by="section" if len(kept) < len(useful) else None)
    return text, rep


def _answer_budget(template: str, param: QueryParam, response_instructions: str) -> int:
    """The data one answering call (the reduce, or the direct answer) may read: the synthesis budget (nano-graphrag's
    final-context default, ``synthesis_budget``) within the model's window around its prompt."""
    prompt = template.format(response_type=response_instructions, report_data="")
    return synthesis_budget(param, total_context_budget(param, prompt).total)


def reduce_budget(param: QueryParam, response_instructions: str = "") -> int:
    return _answer_budget(global_reduce.SYSTEM, param, response_instructions)


def direct_budget(param: QueryParam, response_instructions: str = "") -> int:
    return _answer_budget(global_direct.SYSTEM, param, response_instructions)


def direct_context(plan: GlobalPlan, param: QueryParam, response_instructions: str = "") -> tuple[str, int, int] | None:
    """(the selected groups' report tables joined, their tokens, the budget) when together they fit one call's
    synthesis budget (``global_direct_answer``): the answer is then written from the reports in one LLM round
    trip. The map phase exists to compress more reports than one context holds; when the selection fits, mapping
    it costs a round trip (two when its points cannot be the answer as they are) and the tokens of every group's
    prompt and points, and the answer sees the points instead of the reports they came from. The joined tables
    are counted from the groups' own counts and their seams (``line_tokens.joined_tokens``), not encoded again.
    None: map, then reduce."""
    if not param.global_direct_answer or not plan.groups:
        return None
    budget = direct_budget(param, response_instructions)
    contexts = [g.context for g in plan.groups]
    tokens = joined_tokens(contexts, param.model, [g.tokens for g in plan.groups])
    return (SECTION_SEPARATOR.join(contexts), tokens, budget) if tokens <= budget else None


def build_direct_messages(report_data: str, query: str, response_type: str) -> list[dict]:
    return _answer_messages(global_direct.SYSTEM, report_data, query, response_type)
