"""Generate community reports for a batch of communities of one level (bottom-up)."""

from __future__ import annotations

from collections.abc import Callable

from shared.models import CommunityReport
from shared.reports import build_report_context, build_report_messages, extractive_report, parse_report
from shared.store.redis_graph import GraphStore

ChatFn = Callable[[list[dict], str], str]


def run_report_batch(store: GraphStore, community_ids: list[str], settings, chat: ChatFn | None) -> dict:
    """Reuse a report whose community signature is unchanged; otherwise generate one."""
    batch = store.communities_by_ids(community_ids)
    communities = {**store.communities_by_ids(c for b in batch.values() for c in b.children), **batch}
    existing = store.reports_by_ids(communities)
    generated = reused = failed = 0
    errors: dict[str, str] = {}
    for cid in community_ids:
        community = communities.get(cid)
        if community is None:
            continue
        current = existing.get(cid)
        if current is not None and current.signature == community.signature:
            reused += 1
            continue
        cached = store.cached_report(community.signature)
        if cached is not None:
            store.save_report(cached.model_copy(update={"community_id": cid, "level": community.level}))
            reused += 1
            continue
        entities = store.entities(community.nodes)
        relations = store.relations(community.edges)
        sub_reports = {
            child: existing[child] for child in community.children
            if child in existing and child in communities and existing[child].signature == communities[child].signature
        }
        try:
            report = _generate(community, entities, relations, sub_reports, communities, settings, chat)
        except Exception as exc:  # noqa: BLE001 - recorded; an extractive report keeps the graph usable
            errors[cid] = f"{type(exc).__name__}: {exc}"[:300]
            report = extractive_report(community, entities, relations, sub_reports)
            report.signature = ""  # do not cache a fallback under the real signature
            failed += 1
        else:
            generated += 1
        existing[cid] = report
        store.save_report(report)
    return {"generated": generated, "reused": reused, "failed": failed, "errors": errors}


def _generate(community, entities, relations, sub_reports, communities, settings, chat: ChatFn | None
              ) -> CommunityReport:
    if chat is None or len(community.nodes) < settings.report.min_llm_members:
        report = extractive_report(community, entities, relations, sub_reports)
        report.signature = community.signature
        return report
    text, _info = build_report_context(
        community, entities, relations, sub_reports, settings.report.max_input_tokens, settings.llm_model,
        sub_communities=communities,
    )
    answer = chat(build_report_messages(text), "report")
    return parse_report(answer, community, community.signature)
