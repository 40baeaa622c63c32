"""Extractive reports written by the clustering that has just read their rows.

An incremental clustering reads every row of the communities a job touched, to give each its chunk ids and its
signature (``cluster_stage._extend``). The report stage then read the same rows again for each community reported
without an LLM (all of them on the LLM-free path), and the communities of an entity every batch names again grow
with the tenant. This writes those reports into the report cache under their signatures while the rows are in
hand; the report stage finds them there (``CommunityStore.cached_reports``) and reads no row for them. Only the
cache is written, before the communities are saved: an entry is keyed by its content's signature, so a clustering
run again writes the same entries, and a job that stops before its report stage leaves entries the next prune
drops. The whole-graph clustering does not write them: there the report waves spread the work over the report
workers, and a large tenant's clustering task stays well within its time limit.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from shared.domain.models import Community, CommunityReport, Entity, Relation
from shared.domain.report_reuse import with_basis
from shared.domain.reports import extractive_report
from shared.infra.store.redis_graph import GraphStore
from shared.pipeline.report_stage import asks_llm


def cache_extractive_reports(store: GraphStore, touched: Sequence[Community], entities: Mapping[str, Entity],
                             relations: Mapping[tuple[str, str], Relation], degrees: Mapping[str, int],
                             settings) -> int:
    """Write the reports of the ``touched`` communities reported without an LLM whose signature has no current or
    cached report, as the report stage would make them: deepest first, each listing its children's current
    reports, with the members' ``degrees`` as the clustering stores them (absent: 0). Returns how many were
    written."""
    cheap = [c for c in touched if c.signature and not asks_llm(c, settings, settings.llm_enabled)]
    if not cheap:
        return 0
    by_id = {c.id: c for c in touched}
    outside = sorted({k for c in cheap for k in c.children if k not in by_id})
    signatures = {cid: c.signature for cid, c in by_id.items()}
    signatures.update((cid, c.signature) for cid, c in store.communities_by_ids(outside).items())
    existing = store.reports_by_ids([*(c.id for c in cheap), *(k for c in cheap for k in c.children)])
    current = {cid: r for cid, r in existing.items() if r.signature and r.signature == signatures.get(cid)}
    known = store.cached_reports(c.signature for c in cheap)
    fresh: list[CommunityReport] = []
    for community in sorted(cheap, key=lambda c: (-c.level, c.id)):
        if community.id in current:
            continue  # the report stage keeps it
        if community.signature in known:
            current[community.id] = known[community.signature]
            continue
        ents = {n: _with_degree(entities[n], degrees.get(n, 0)) for n in community.nodes if n in entities}
        rels = {key: relations[key] for key in (tuple(sorted(e)) for e in community.edges) if key in relations}
        subs = {k: current[k] for k in community.children if k in current}
        report = extractive_report(community, ents, rels, subs)
        report.signature = community.signature
        with_basis(report, community, ents, rels)
        known[community.signature] = current[community.id] = report
        fresh.append(report)
    store.cache_reports(fresh)
    return len(fresh)


def _with_degree(entity: Entity, degree: int) -> Entity:
    return entity if entity.degree == degree else entity.model_copy(update={"degree": degree})
