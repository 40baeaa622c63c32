"""Generate community reports for a batch of communities of one level (bottom-up)."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from shared.domain.models import CommunityReport
from shared.domain.report_context import build_report_context
from shared.domain.report_reuse import with_basis
from shared.domain.reports import build_report_messages, extractive_report, parse_report
from shared.infra.llm.client import CanceledError, LLMUnavailable
from shared.infra.store.redis_graph import GraphStore

ChatFn = Callable[[list[dict], str], str]


def plan_report_batches(store: GraphStore, community_ids: list[str], settings, llm: bool) -> list[list[str]]:
    """Split one wave into tasks: communities that need an LLM call ``report.communities_per_task`` per
    task (asked side by side in the task, the tasks in parallel across workers), the ones reported
    extractively (no LLM call: fewer members than ``report.min_llm_members``, or no LLM)
    ``report.extractive_per_task`` per task, since each costs only a few Redis reads and a task per
    community would spend more on queueing."""
    cfg = settings.report
    communities = store.communities_by_ids(community_ids)
    needs_llm = [c for c in community_ids if c in communities and asks_llm(communities[c], settings, llm)]
    chosen = set(needs_llm)
    cheap = [c for c in community_ids if c not in chosen]

    def chunks(ids: list[str], size: int) -> list[list[str]]:
        size = max(1, size)
        return [ids[i : i + size] for i in range(0, len(ids), size)]

    return chunks(needs_llm, cfg.communities_per_task) + chunks(cheap, cfg.extractive_per_task)


def asks_llm(community, settings, llm: bool) -> bool:
    """Whether ``community``'s report is asked of the LLM: with one, for ``report.min_llm_members`` members or more
    (smaller ones get an extractive report)."""
    return llm and len(community.nodes) >= settings.report.min_llm_members


def run_report_batch(store: GraphStore, community_ids: list[str], settings, chat: ChatFn | None) -> dict:
    """Reuse a report whose community signature is unchanged; otherwise generate one. Inputs are read
    for the whole batch up front, the batch's LLM reports are asked for all at once (a thread each, as when
    each was a task of its own: ``report.communities_per_task``), and the new reports are written in one round
    trip at the end."""
    batch = store.communities_by_ids(community_ids)
    held = store.report_signatures(batch)
    todo = [batch[cid] for cid in community_ids if cid in batch and held.get(cid) != batch[cid].signature]
    cached = store.cached_signatures(c.signature for c in todo)
    uncached = [c for c in todo if c.signature not in cached]
    # what a report made from rows reads beside them: its sub-communities and their reports (none read when every
    # changed community's report is in the cache, as the clustering leaves the extractive ones)
    communities = {**store.communities_by_ids(ch for c in uncached for ch in c.children), **batch}
    existing = store.reports_by_ids(ch for c in uncached for ch in c.children)
    entities = store.entities(n for c in uncached for n in c.nodes)
    relations = store.relations(e for c in uncached for e in c.edges)

    def report_of(community) -> tuple[CommunityReport, str | None]:
        """(report, None), or an extractive report and the error that stopped the LLM one."""
        ents = {n: entities[n] for n in community.nodes if n in entities}
        rels = {key: relations[key] for key in (tuple(sorted(e)) for e in community.edges) if key in relations}
        sub_reports = {
            child: existing[child] for child in community.children
            if child in existing and child in communities and existing[child].signature == communities[child].signature
        }
        try:
            return _generate(community, ents, rels, sub_reports, communities, settings, chat), None
        except (CanceledError, LLMUnavailable):  # canceled, or the endpoint is down: the task waits for it
            raise
        except Exception as exc:  # noqa: BLE001 - recorded; an extractive report keeps the graph usable
            report = extractive_report(community, ents, rels, sub_reports)
            report.signature = ""  # do not cache a fallback under the real signature
            return report, f"{type(exc).__name__}: {exc}"[:300]

    # A wave's LLM communities read no report of the same wave (one that would use its children's reports waits for
    # them: ``report_waves``), so they are asked together; extractive ones follow in order, reading the fresh ones.
    asked = _in_threads(report_of, [c for c in uncached if asks_llm(c, settings, chat is not None)],
                        settings.workers.llm_concurrency)
    errors: dict[str, str] = {}
    new: list[CommunityReport] = []
    generated = 0
    for community in uncached:
        cid = community.id
        report, error = asked[cid] if cid in asked else report_of(community)
        if error is not None:
            errors[cid] = error
        else:
            generated += 1
        existing[cid] = report
        new.append(report)
    if todo:
        store.save_reports(new, [c for c in todo if c.signature in cached])
    return {"generated": generated, "reused": len(community_ids) - generated - len(errors), "failed": len(errors),
            "errors": errors}


def _in_threads(fn: Callable, communities: list, at_most: int) -> dict:
    """community id -> ``fn(community)``, the calls run side by side (a thread each, at most ``at_most``: the
    threads of an LLM-bound worker process; one runs inline)."""
    if len(communities) <= 1:
        return {c.id: fn(c) for c in communities}
    with ThreadPoolExecutor(max(1, min(len(communities), at_most)), thread_name_prefix="report") as pool:
        return dict(zip((c.id for c in communities), pool.map(fn, communities), strict=True))


def _generate(community, entities, relations, sub_reports, communities, settings, chat: ChatFn | None
              ) -> CommunityReport:
    if not asks_llm(community, settings, chat is not None):
        report = extractive_report(community, entities, relations, sub_reports)
        report.signature = community.signature
        return with_basis(report, community, entities, relations)
    text, _info = build_report_context(
        community, entities, relations, sub_reports, settings.report.max_input_tokens, settings.llm_model,
        sub_communities=communities,
    )
    answer = chat(build_report_messages(text), "report")
    return with_basis(parse_report(answer, community, community.signature), community, entities, relations)
