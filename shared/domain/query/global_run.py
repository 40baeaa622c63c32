"""Global search: plan, the answer without a map phase when one is not needed, map, reduce.

Run inline here (tests, single-process use: a parallel map with a deadline), or by the workers along the
declared query flow (``shared.pipeline.flow.QUERY``): the query task plans and answers what needs no map
phase (:func:`answer_without_map`), else the map groups fan out and :func:`finish_global` reduces them."""

from __future__ import annotations

import concurrent.futures as cf
import logging
import time
from collections.abc import Callable, Sequence

from shared.domain.models import CommunityReport, MapPoint
from shared.domain.query.budget import SectionReport
from shared.domain.query.context_common import Evidence, Sources
from shared.domain.query.context_global import (
    GlobalPlan,
    build_direct_messages,
    build_map_messages,
    build_reduce_messages,
    direct_context,
    plan_global,
    reduce_budget,
    reduce_points,
    visible_context,
)
from shared.domain.query.formats import check_response_format, normalize_type, response_instructions
from shared.domain.query.global_select import anchor_scores
from shared.domain.query.map_points import parse_map_points
from shared.domain.query.params import QueryParam
from shared.domain.query.result import QueryResult, UsageMeter, extractive_answer
from shared.domain.retrieval.bm25 import tokenize

log = logging.getLogger(__name__)
NO_ANSWER = "Sorry, the community reports hold nothing relevant to this question."


def collect_map_results(
    plan: GlobalPlan, results: dict[int, str | None]
) -> tuple[list[tuple[int, MapPoint]], bool, str | None]:
    """Points from the map groups that answered; a missing/None/failed group makes the result partial."""
    points: list[tuple[int, MapPoint]] = []
    missing = [g.index for g in plan.groups if results.get(g.index) is None]
    for g in plan.groups:
        text = results.get(g.index)
        if text:
            for p in parse_map_points(text):
                if not p.community_id:
                    p.community_id = ",".join(g.report_ids)
                points.append((g.index, p))
    reason = None
    if missing:
        reason = f"{len(missing)} of {len(plan.groups)} map groups did not answer (groups {missing[:10]})"
    return points, bool(missing), reason


def lexical_rater(query: str) -> Callable[[CommunityReport], float]:
    """Offline rater for dynamic selection: 5 x the share of query terms the report mentions (0-5)."""
    terms = set(tokenize(query))

    def rate(rep: CommunityReport) -> float:
        if not terms:
            return 5.0
        words = set(tokenize(f"{rep.title}\n{rep.summary}\n{rep.full_text}"))
        return 5.0 * len(terms & words) / len(terms)
    return rate


def _map_all(plan: GlobalPlan, query: str, meter: UsageMeter, deadline_s: float, workers: int
             ) -> dict[int, str | None]:
    results: dict[int, str | None] = {}
    if not plan.groups:
        return results
    pool = cf.ThreadPoolExecutor(max_workers=max(1, min(workers, len(plan.groups))))
    futures = {pool.submit(meter, build_map_messages(g, query), "map"): g.index for g in plan.groups}
    done, _ = cf.wait(futures, timeout=deadline_s)
    for fut, idx in futures.items():
        if fut in done and fut.exception() is None:
            results[idx] = fut.result()
        else:
            results[idx] = None
    pool.shutdown(wait=False, cancel_futures=True)  # a lost map call must not hang the query
    return results


def start_global(param: QueryParam, reader, rate: Callable[[CommunityReport], float] | None = None,
                 entity_hits: Sequence[tuple[str, float]] | Callable[[], Sequence] | None = None
                 ) -> tuple[GlobalPlan, QueryResult]:
    """Plan the map groups and the result skeleton (sources, context, budget). Pure given ``reader``.
    ``entity_hits``: the question's entity search (name, score), best first, which anchors the relevance
    selection in the communities holding those entities."""
    communities, reports = reader.community_rows()
    if (param.dynamic_community_selection or param.global_selection == "dynamic") and rate is None:
        rate = lexical_rater(param.query)
    hits = entity_hits() if callable(entity_hits) else entity_hits  # a callable: the search runs meanwhile
    anchors = anchor_scores(communities, hits) if hits else None
    plan = plan_global(communities, reports, param, rate, anchors)
    result = QueryResult(mode="global", budget=plan.budget,
                         details={"groups": len(plan.groups), "dynamic": plan.dynamic.model_dump()
                                  if plan.dynamic else None,
                                  "selection": plan.selection.model_dump() if plan.selection else None})
    sources = Sources()
    for cid in plan.selected:
        r = reports[cid]
        sources.add(Evidence(kind="report", cite=cid, key=cid, text=f"{r.title}. {r.summary}", score=r.rating))
    result.sources, result.citations = sources, sources.citations()
    if param.only_need_context or param.include_context:
        result.context, shown = visible_context(plan, param.model, param.query)
        result.details["context_groups"] = f"{shown}/{len(plan.groups)}"
        if shown < len(plan.groups):
            result.budget.notes.append(
                f"context shows the {shown} of {len(plan.groups)} map groups most relevant to the question (within the "
                f"{plan.context_budget}-token budget); the map phase reads all of them, one call each")
    return plan, result


def finish_global(param: QueryParam, plan: GlobalPlan, result: QueryResult, results: dict[int, str | None],
                  reduce_chat: Callable[[list[dict], str], str]) -> QueryResult:
    """Reduce the map answers (missing groups make the result partial) and answer."""
    points, partial, reason = collect_map_results(plan, results)
    result.partial, result.partial_reason = partial, reason
    instructions = response_instructions(param.response_type)
    text, sec = reduce_points(points, reduce_budget(param, instructions), param.model)
    result.budget.sections.append(sec)
    result.budget.finalize()
    result.details["map_points"] = len(points)
    # the reports each useful point cites, with its score: what the map found, per report
    result.details["points"] = [[p.community_id, p.score] for _g, p in points if p.score > 0]
    if not text:
        result.answer, result.answer_kind = NO_ANSWER, "none"
        return result
    single = None if partial else points_answer(points, param.response_type)
    if single is not None:  # one group answered: its points are the answer, one LLM round trip less
        result.answer, result.answer_kind = single, "llm"
        result.details["reduce"] = "skipped: a single map group answered"
        return result
    result.answer = reduce_chat(build_reduce_messages(text, param.query, instructions), "reduce")
    result.answer_kind = "llm"
    return result


def answer_direct(param: QueryParam, plan: GlobalPlan, result: QueryResult,
                  chat: Callable[[list[dict], str], str]) -> QueryResult | None:
    """The answer written in one call from the selected reports when they fit the synthesis budget
    (``context_global.direct_context``); None when the plan needs its map phase. A failed call leaves the
    extractive answer over the same reports, marked partial with its cause."""
    instructions = response_instructions(param.response_type)
    direct = direct_context(plan, param, instructions)
    if direct is None:
        return None
    text, tokens, budget = direct
    result.budget.sections.append(SectionReport(name="direct", candidates=len(plan.selected), kept=len(plan.selected),
                                                tokens_used=tokens, tokens_allowed=budget))
    result.budget.notes.append(f"the {len(plan.groups)} selected groups fit one call: answered from the reports "
                               "directly (no map phase)")
    result.budget.finalize()
    result.details["reduce"] = "skipped: the selected reports fit one call, answered directly without a map phase"
    result.details["answer_path"] = "direct"
    try:
        result.answer = chat(build_direct_messages(text, param.query, instructions), "answer")
        result.answer_kind = "llm"
    except Exception as exc:  # noqa: BLE001 - the reports are at hand: answer from them, say what failed
        result.partial, result.partial_reason = True, f"direct answer failed: {type(exc).__name__}: {exc}"
        result.answer = extractive_answer(param.query, result.sources)
        result.answer_kind = "extractive" if result.answer else "none"
    return result


def answer_without_map(param: QueryParam, plan: GlobalPlan, result: QueryResult,
                       chat: Callable[[list[dict], str], str] | None) -> QueryResult | None:
    """The answer of a global query that needs no map phase; None when its map groups are to fan out.

    Without one: only the context was asked for; there is no LLM (``chat`` None) or no report was selected (the
    extractive answer over the selected reports); the selected reports fit one call (:func:`answer_direct`); or
    the plan has a single map group, whose call runs here and whose points are the answer (no hop to a map
    worker, no reduce; a failed call makes the result partial)."""
    if param.only_need_context or chat is None or not plan.groups:
        if not param.only_need_context:
            result.answer = extractive_answer(param.query, result.sources)
            result.answer_kind = "extractive" if result.answer else "none"
        return result
    direct = answer_direct(param, plan, result, chat)
    if direct is not None:
        return direct
    if len(plan.groups) > 1:
        return None
    try:
        text = chat(build_map_messages(plan.groups[0], param.query), "map")
    except Exception as exc:  # noqa: BLE001 - a failed group makes the answer partial, not failed
        log.warning("the map call of a single-group global query failed: %s", exc)
        text = None
    return finish_global(param, plan, result, {0: text}, chat)


def points_answer(points: Sequence[tuple[int, MapPoint]], response_type: str) -> str | None:
    """The answer rendered from the map points when a single group answered (Microsoft GraphRAG's map points
    are already the key points with their report references), in the requested layout; None when several
    groups answered or the layout needs the reduce (comparison, pros and cons, analysis with headings...)."""
    useful = sorted((p for _g, p in points if p.score > 0), key=lambda p: -p.score)
    if not useful or len({g for g, p in points if p.score > 0}) != 1:
        return None
    texts = [p.description.strip() for p in useful if p.description.strip()]
    kind = normalize_type(response_type)
    render = {
        "single_paragraph": lambda: " ".join(texts),
        "bullet_points": lambda: "\n".join(f"- {t}" for t in texts),
        "numbered_list": lambda: "\n".join(f"{i}. {t}" for i, t in enumerate(texts, 1)),
    }.get(kind, lambda: "\n\n".join(texts))
    answer = render()
    return answer if check_response_format(answer, response_type)[0] else None


def run_global_inline(
    param: QueryParam, reader, chat=None, rate: Callable[[CommunityReport], float] | None = None,
    meter: UsageMeter | None = None, max_workers: int = 8, entity_hits=None,
) -> QueryResult:
    started = time.monotonic()
    plan, result = start_global(param, reader, rate, entity_hits)
    if param.only_need_context:
        return result
    if chat is None:
        result.answer, result.answer_kind = extractive_answer(param.query, result.sources), "extractive"
        return result
    meter = meter or UsageMeter(chat, param.model)
    direct = answer_direct(param, plan, result, meter)
    if direct is not None:
        direct.usage = meter.usage
        return direct
    remaining = max(0.0, param.deadline_s - (time.monotonic() - started))
    results = _map_all(plan, param.query, meter, remaining, max_workers)
    result = finish_global(param, plan, result, results, meter)
    result.usage = meter.usage
    return result
