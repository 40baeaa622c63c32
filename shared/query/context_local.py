"""Local mode context (nano-graphrag / seeds 000, 002): entities found by hybrid search, their
relations, related community reports, and text units, as CSV sections under one budget."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from shared.models import CommunityReport, Entity, Relation
from shared.query.budget import (
    PRIORITY,
    BudgetReport,
    Section,
    allocate,
    make_report,
    section_caps,
    total_context_budget,
)
from shared.query.context_common import (
    Evidence,
    Sources,
    csv_row,
    fuse_chunk_rankings,
    linked_chunk_order,
    order_chunks,
    rel_key,
    sources_section,
)
from shared.query.params import QueryParam

RENDER_ORDER = ("reports", "entities", "relationships", "sources")


def report_text(rep: CommunityReport) -> str:
    if rep.full_text:
        return rep.full_text
    parts = [f"# {rep.title}", rep.summary] + [f"- {f.summary}: {f.explanation}" for f in rep.findings]
    return "\n".join(p for p in parts if p)


def order_entities(entities: Sequence[Entity], retrieval_rank: dict[str, int]) -> list[Entity]:
    """Seed 003: entities by rank (degree) first, retrieval order breaking ties."""
    return sorted(entities, key=lambda e: (-e.degree, retrieval_rank.get(e.name, 1 << 30)))


def order_relations(relations: Sequence[Relation]) -> list[Relation]:
    """Seed 003: relations by weight, then rank; duplicates (A,B)/(B,A) merged."""
    seen: dict[tuple[str, str], Relation] = {}
    for r in relations:
        seen.setdefault(tuple(sorted((r.src, r.tgt))), r)
    return sorted(seen.values(), key=lambda r: (-r.weight, -r.rank, r.src, r.tgt))


def entity_section(entities: Sequence[Entity], cap: int | None, scores: dict[str, float] | None = None
                   ) -> tuple[Section, list[Evidence]]:
    rows, ev = [], []
    for i, e in enumerate(entities, start=1):
        rows.append(csv_row([f"E{i}", e.name, e.type, e.description, e.degree]))
        ev.append(Evidence(kind="entity", cite=f"E{i}", key=e.name, text=f"{e.name}: {e.description}",
                           doc_ids=list(e.doc_ids), chunk_ids=list(e.source_ids),
                           score=(scores or {}).get(e.name, 0.0)))
    return Section("entities", rows, "Entities", "id,entity,type,description,rank", cap), ev


def relation_section(relations: Sequence[Relation], cap: int | None) -> tuple[Section, list[Evidence]]:
    rows, ev = [], []
    for i, r in enumerate(relations, start=1):
        rows.append(csv_row([f"R{i}", r.src, r.tgt, r.description, r.weight, r.rank]))
        ev.append(Evidence(kind="relation", cite=f"R{i}", key=rel_key(r.src, r.tgt),
                           text=f"{r.src} -> {r.tgt}: {r.description}", doc_ids=list(r.doc_ids),
                           chunk_ids=list(r.source_ids), score=r.weight))
    return Section("relationships", rows, "Relationships", "id,source,target,description,weight,rank", cap), ev


def report_section(reports: Sequence[CommunityReport], cap: int | None) -> tuple[Section, list[Evidence]]:
    rows, ev = [], []
    for rep in reports:
        text = report_text(rep)
        rows.append(csv_row([rep.community_id, rep.title, text, rep.rating]))
        ev.append(Evidence(kind="report", cite=rep.community_id, key=rep.community_id,
                           text=f"{rep.title}: {rep.summary}", score=rep.rating))
    return Section("reports", rows, "Reports", "id,title,content,rating", cap), ev


def related_reports(reader, names: Sequence[str], level: int) -> list[CommunityReport]:
    """Communities of the entities at level <= ``level``, by occurrence count then rating."""
    by_name = reader.entities_communities(names)
    communities = reader.communities_by_ids(c for cids in by_name.values() for c in cids)
    counts: Counter[str] = Counter()
    for name in names:
        for cid in by_name.get(name, ()):
            c = communities.get(cid)
            if c is not None and c.level <= level:
                counts[cid] += 1
    reports = reader.reports_by_ids(counts)
    found = [reports[c] for c in counts if c in reports]
    return sorted(found, key=lambda r: (-counts[r.community_id], -r.rating, r.community_id))


def linked_chunks(reader, entities: Sequence[Entity], relations: Sequence[Relation]) -> list[str]:
    neighbours: dict[str, set[str]] = {}
    for r in relations:
        neighbours.setdefault(r.src, set()).add(r.tgt)
        neighbours.setdefault(r.tgt, set()).add(r.src)
    all_n = {n for ns in neighbours.values() for n in ns}
    n_ents = reader.entities(all_n) if all_n else {}
    n_src = {
        e.name: [set(n_ents[n].source_ids) for n in neighbours.get(e.name, ()) if n in n_ents]
        for e in entities
    }
    return linked_chunk_order([e.name for e in entities], {e.name: e.source_ids for e in entities}, n_src)


def assemble(
    sections_ev: dict[str, tuple[Section, list[Evidence]]], param: QueryParam, mode: str, total_budget,
    render_order: Sequence[str] = RENDER_ORDER,
) -> tuple[str, BudgetReport, Sources]:
    """Allocate in priority order, render, and collect the kept evidence."""
    ordered = [sections_ev[n][0] for n in PRIORITY if n in sections_ev]
    alloc = allocate(ordered, total_budget.total, param.model, render_order, param.min_partial_tokens)
    report = make_report(param, mode, total_budget, alloc)
    sources = Sources()
    for name in render_order:
        if name not in sections_ev:
            continue
        evidence = sections_ev[name][1]
        kept = alloc.kept_index.get(name, [])
        for i in kept:
            sources.add(evidence[i])
        if name == "sources":
            sources.omitted_chunks = [e.key for i, e in enumerate(evidence) if i not in set(kept)]
    return alloc.context, report, sources


def build_local_context(
    reader,
    entity_hits: Sequence[tuple[str, float]],
    param: QueryParam,
    direct_chunks: Sequence[tuple[str, float]] = (),
    system_prompt: str = "",
) -> tuple[str, BudgetReport, Sources]:
    names = [n for n, _ in entity_hits]
    rank = {n: i for i, n in enumerate(names)}
    found = reader.entities(names) if names else {}
    entities = order_entities([found[n] for n in names if n in found], rank)
    relations = order_relations(reader.relations_of([e.name for e in entities])) if entities else []
    reports = related_reports(reader, [e.name for e in entities], param.level)
    linked = linked_chunks(reader, entities, relations)
    ranked = fuse_chunk_rankings(direct_chunks, linked, param.rrf_k)[: 2 * param.chunk_top_k]
    chunk_map = reader.chunks([c for c, _ in ranked]) if ranked else {}
    items = order_chunks(ranked, chunk_map, param.text_order, param.model)

    tb = total_context_budget(param, system_prompt)
    caps = section_caps(param, "local", tb.total)
    sections = {
        "entities": entity_section(entities, caps["entities"], dict(entity_hits)),
        "relationships": relation_section(relations, caps["relationships"]),
        "reports": report_section(reports, caps["reports"]),
        "sources": sources_section(items, param, caps["sources"]),
    }
    return assemble(sections, param, "local", tb)
