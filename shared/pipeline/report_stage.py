"""Generate community reports for a batch of communities of one level (bottom-up)."""

from __future__ import annotations

from collections.abc import Callable

from shared.domain.models import CommunityReport
from shared.domain.reports import build_report_context, build_report_messages, extractive_report, parse_report
from shared.infra.llm.client import CanceledError
from shared.infra.store.redis_graph import GraphStore

ChatFn = Callable[[list[dict], str], str]


def plan_report_batches(store: GraphStore, community_ids: list[str], settings, llm: bool) -> list[list[str]]:
    """Split one wave into tasks: communities that need an LLM call ``report.communities_per_task`` per
    task (they run in parallel across workers), the ones reported extractively (no LLM call: fewer
    members than ``report.min_llm_members``, or no LLM) ``report.extractive_per_task`` per task, since
    each costs only a few Redis reads and a task per community would spend more on queueing."""
    cfg = settings.report
    communities = store.communities_by_ids(community_ids)
    needs_llm = [c for c in community_ids if llm and c in communities
                 and len(communities[c].nodes) >= cfg.min_llm_members]
    chosen = set(needs_llm)
    cheap = [c for c in community_ids if c not in chosen]

    def chunks(ids: list[str], size: int) -> list[list[str]]:
        size = max(1, size)
        return [ids[i : i + size] for i in range(0, len(ids), size)]

    return chunks(needs_llm, cfg.communities_per_task) + chunks(cheap, cfg.extractive_per_task)


def run_report_batch(store: GraphStore, community_ids: list[str], settings, chat: ChatFn | None) -> dict:
    """Reuse a report whose community signature is unchanged; otherwise generate one. Inputs are read
    for the whole batch up front and the new reports written in one round trip at the end."""
    batch = store.communities_by_ids(community_ids)
    communities = {**store.communities_by_ids(c for b in batch.values() for c in b.children), **batch}
    existing = store.reports_by_ids(communities)
    todo = [batch[cid] for cid in community_ids if cid in batch
            and not (cid in existing and existing[cid].signature == batch[cid].signature)]
    cache = store.cached_reports(c.signature for c in todo)
    uncached = [c for c in todo if c.signature not in cache]
    entities = store.entities(n for c in uncached for n in c.nodes)
    relations = store.relations(e for c in uncached for e in c.edges)
    generated = failed = 0
    errors: dict[str, str] = {}
    new: list[CommunityReport] = []
    for community in todo:
        cid = community.id
        cached = cache.get(community.signature)
        if cached is not None:
            new.append(cached.model_copy(update={"community_id": cid, "level": community.level}))
            continue
        ents = {n: entities[n] for n in community.nodes if n in entities}
        rels = {key: relations[key] for key in (tuple(sorted(e)) for e in community.edges) if key in relations}
        sub_reports = {
            child: existing[child] for child in community.children
            if child in existing and child in communities and existing[child].signature == communities[child].signature
        }
        try:
            report = _generate(community, ents, rels, sub_reports, communities, settings, chat)
        except CanceledError:
            raise
        except Exception as exc:  # noqa: BLE001 - recorded; an extractive report keeps the graph usable
            errors[cid] = f"{type(exc).__name__}: {exc}"[:300]
            report = extractive_report(community, ents, rels, sub_reports)
            report.signature = ""  # do not cache a fallback under the real signature
            failed += 1
        else:
            generated += 1
        existing[cid] = report
        new.append(report)
    if new:
        store.save_reports(new)
    reused = len(community_ids) - generated - failed
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
