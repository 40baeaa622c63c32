"""Local mode context (nano-graphrag-style local context proportions): entities found by hybrid search, their
relations, related community reports, and text units, as CSV sections under one budget."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from shared.domain.models import CommunityReport, Entity, Relation
from shared.domain.packing import csv_row
from shared.domain.query.budget import (
    EVIDENCE_PRIORITY,
    PRIORITY,
    BudgetReport,
    Section,
    TotalBudget,
    allocate,
    make_report,
    section_caps,
    total_context_budget,
)
from shared.domain.query.context_common import (
    Evidence,
    Sources,
    fuse_chunk_rankings,
    graph_row_tokens,
    linked_chunk_order,
    order_chunks,
    rel_key,
    row_shrinker,
    sources_section,
)
from shared.domain.query.lazy import lazy_map
from shared.domain.query.params import QueryParam
from shared.domain.query.passages import Ranking
from shared.domain.query.row_counts import static_line

RENDER_ORDER = ("reports", "entities", "relationships", "sources")


def report_text(rep: CommunityReport) -> str:
    if rep.full_text:
        return rep.full_text
    parts = [f"# {rep.title}", rep.summary] + [f"- {f.summary}: {f.explanation}" for f in rep.findings]
    return "\n".join(p for p in parts if p)


def order_entities(entities: Sequence[Entity], retrieval_rank: dict[str, int]) -> list[Entity]:
    """Causal-search ordering: entities by rank (degree) first, retrieval order breaking ties."""
    return sorted(entities, key=lambda e: (-e.degree, retrieval_rank.get(e.name, 1 << 30)))


RELATIONS_PER_ENTITY = 4  # relation rows considered: this many per context entity (hubs have hundreds)
MAX_RELATED_REPORTS = 16  # community reports read for a local context (most shared by its entities first)


def order_relations(relations: Sequence[Relation], limit: int | None = None) -> list[Relation]:
    """Causal-search ordering: relations by weight, then rank; duplicates (A,B)/(B,A) merged; the best ``limit``."""
    seen: dict[tuple[str, str], Relation] = {}
    for r in relations:
        seen.setdefault(tuple(sorted((r.src, r.tgt))), r)
    return sorted(seen.values(), key=lambda r: (-r.weight, -r.rank, r.src, r.tgt))[:limit]


GRAPH_ROW_MIN_PARTIAL = 24  # a graph row cut to a sentence is worth it from this many tokens


ENTITY_NUMERIC, RELATION_NUMERIC = 1, 2  # a row's trailing cells read at query time: degree; weight and rank


def entity_cells(cite: str, e: Entity) -> list:
    return [cite, e.name, e.type, e.description, e.degree]


def relation_cells(cite: str, r: Relation) -> list:
    return [cite, r.src, r.tgt, r.description, r.weight, r.rank]


def entity_static(e: Entity) -> str:
    """The part of an entity's row that the merge fixes (name, type, description): its tokens are stored with it."""
    return static_line(entity_cells("", e), ENTITY_NUMERIC)


def relation_static(r: Relation) -> str:
    """The part of a relation's row that the merge fixes (source, target, description), as for an entity."""
    return static_line(relation_cells("", r), RELATION_NUMERIC)


CITED_PER_ROW = 20  # the chunks and the documents an entity's or a relation's evidence cites, at most


def cited(ids: Sequence[str]) -> list[str]:
    """The first ``CITED_PER_ROW`` of a graph row's chunk or document ids, as its evidence cites them. A hub entity
    is extracted from tens of thousands of chunks: citing them all put every one of its documents in a query's
    sources and made the query read all those chunks and documents (2 s at 67,485, after 20 s in the sources'
    bookkeeping). The row keeps them all (the entity view lists them)."""
    return list(ids[:CITED_PER_ROW])


def entity_section(entities: Sequence[Entity], cap: int | None, scores: dict[str, float] | None = None,
                   model: str | None = None) -> tuple[Section, Sequence[Evidence]]:
    """Rows, evidence and token estimates made as the allocator reads them (``lazy``)."""
    scores = scores or {}
    cells = lazy_map(entities, lambda i, e: entity_cells(f"E{i + 1}", e))
    ev = lazy_map(entities, lambda i, e: Evidence(
        kind="entity", cite=f"E{i + 1}", key=e.name, text=f"{e.name}: {e.description}", doc_ids=cited(e.doc_ids),
        chunk_ids=cited(e.source_ids), score=scores.get(e.name, 0.0)))

    def shortened(i: int, text: str) -> None:
        ev[i] = ev[i].model_copy(update={"text": f"{entities[i].name}: {text}"})

    shrink = row_shrinker(lambda i: cells[i], 3, model, shortened)
    return Section("entities", lazy_map(cells, lambda _i, c: csv_row(c)), "Entities",
                   "id,entity,type,description,rank", cap, shrink=shrink, min_partial=GRAPH_ROW_MIN_PARTIAL,
                   row_tokens=graph_row_tokens(cells, 3, entities, ENTITY_NUMERIC, model)), ev


def relation_section(relations: Sequence[Relation], cap: int | None, model: str | None = None
                     ) -> tuple[Section, Sequence[Evidence]]:
    """Rows, evidence and token estimates made as the allocator reads them (``lazy``)."""
    cells = lazy_map(relations, lambda i, r: relation_cells(f"R{i + 1}", r))
    ev = lazy_map(relations, lambda i, r: Evidence(
        kind="relation", cite=f"R{i + 1}", key=rel_key(r.src, r.tgt), text=f"{r.src} -> {r.tgt}: {r.description}",
        doc_ids=cited(r.doc_ids), chunk_ids=cited(r.source_ids), score=r.weight))

    def shortened(i: int, text: str) -> None:
        ev[i] = ev[i].model_copy(update={"text": f"{relations[i].src} -> {relations[i].tgt}: {text}"})

    shrink = row_shrinker(lambda i: cells[i], 3, model, shortened)
    return Section("relationships", lazy_map(cells, lambda _i, c: csv_row(c)), "Relationships",
                   "id,source,target,description,weight,rank", cap, shrink=shrink, min_partial=GRAPH_ROW_MIN_PARTIAL,
                   row_tokens=graph_row_tokens(cells, 3, relations, RELATION_NUMERIC, model)), ev


def report_section(reports: Sequence[CommunityReport], cap: int | None, model: str | None = None
                   ) -> tuple[Section, list[Evidence]]:
    rows, ev = [], []
    cells = [[rep.community_id, rep.title, report_text(rep), rep.rating] for rep in reports]
    for rep, row in zip(reports, cells, strict=True):
        rows.append(csv_row(row))
        ev.append(Evidence(kind="report", cite=rep.community_id, key=rep.community_id,
                           text=f"{rep.title}: {rep.summary}", score=rep.rating))
    shrink = row_shrinker(lambda i: cells[i], 2, model)
    return Section("reports", rows, "Reports", "id,title,content,rating", cap, shrink=shrink,
                   min_partial=GRAPH_ROW_MIN_PARTIAL), ev


def related_reports(reader, names: Sequence[str], level: int) -> list[CommunityReport]:
    """Communities of the entities at level <= ``level``, by occurrence count then rating."""
    by_name = reader.entities_communities(names)
    # only these entities' reports (a report knows its level): a cold worker's first query must not parse
    # every community and report of the tenant to rank a few of them
    reports = reader.reports_by_ids([cid for name in names for cid in by_name.get(name, ())])
    counts: Counter[str] = Counter()
    for name in names:
        for cid in by_name.get(name, ()):
            r = reports.get(cid)
            if r is not None and r.level <= level:
                counts[cid] += 1
    wanted = {c for c, _n in counts.most_common(MAX_RELATED_REPORTS)}
    found = [reports[c] for c in counts if c in wanted and c in reports]
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
    sections_ev: dict[str, tuple[Section, list[Evidence]]], param: QueryParam, mode: str, total_budget: TotalBudget,
    render_order: Sequence[str] = RENDER_ORDER,
) -> tuple[str, BudgetReport, Sources]:
    """Allocate in priority order, render, and collect the kept evidence. ``budget_split="evidence"``:
    passages first (best first, filling the budget), graph rows in the room they leave, each within its
    cap; "fixed": nano-graphrag's overflow priorities, a section cut by the total stopping the ones after it."""
    evidence_split = param.budget_split == "evidence"
    priority = EVIDENCE_PRIORITY if evidence_split else PRIORITY
    ordered = [sections_ev[n][0] for n in priority if n in sections_ev]
    alloc = allocate(ordered, total_budget.total, param.model, render_order, param.min_partial_tokens,
                     stop_on_cut=not evidence_split)
    report = make_report(param, mode, total_budget, alloc)
    if evidence_split and len(ordered) > 1:
        report.notes.append("evidence split: passages first, graph rows in the room they leave (within caps)")
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


def graph_entities(reader, names: Sequence[str], param: QueryParam, ranking: Ranking | None) -> list[Entity]:
    """The entities of a context: found ones ordered by degree (as causal search ranks them), or, with a graph
    walk under the evidence split, the hits and the walk's best entities ordered by walk score (what the
    question names and the bridges to its answer before hubs)."""
    if ranking is not None and ranking.entities and param.budget_split == "evidence":
        walk_score = dict(ranking.entities)
        pool = list(dict.fromkeys(list(names) + [n for n, _ in ranking.entities[: param.top_k]]))
        found = reader.entities(pool) if pool else {}
        ents = [found[n] for n in pool if n in found]
        return sorted(ents, key=lambda e: -walk_score.get(e.name, 0.0))[: max(param.top_k, len(names))]
    rank = {n: i for i, n in enumerate(names)}
    found = reader.entities(names) if names else {}
    return order_entities([found[n] for n in names if n in found], rank)


def source_items(reader, param: QueryParam, entities: Sequence[Entity], relations: Sequence[Relation],
                 direct_chunks: Sequence[tuple[str, float]], ranking: Ranking | None):
    """Sources best first: the graph walk's ranking when there is one, else direct hits interleaved
    with the entities' linked chunks (nano-graphrag's order)."""
    if ranking is not None:
        ranked = list(ranking.passages)
    else:
        linked = linked_chunks(reader, entities, relations)
        ranked = fuse_chunk_rankings(direct_chunks, linked, param.rrf_k)[: 2 * param.chunk_top_k]
    chunk_map = reader.chunks([c for c, _ in ranked]) if ranked else {}
    return order_chunks(ranked, chunk_map, param.text_order, param.model)


def build_local_context(
    reader,
    entity_hits: Sequence[tuple[str, float]],
    param: QueryParam,
    direct_chunks: Sequence[tuple[str, float]] = (),
    system_prompt: str = "",
    ranking: Ranking | None = None,
    *,
    budget: TotalBudget | None = None,
) -> tuple[str, BudgetReport, Sources]:
    """``budget``: the query's resolved budget (the engine's); without it, resolved here from
    ``system_prompt``."""
    entities = graph_entities(reader, [n for n, _ in entity_hits], param, ranking)
    limit = RELATIONS_PER_ENTITY * len(entities)
    relations = order_relations(reader.relations_of([e.name for e in entities], limit), limit) if entities else []
    reports = related_reports(reader, [e.name for e in entities], param.level)
    items = source_items(reader, param, entities, relations, direct_chunks, ranking)

    tb = budget if budget is not None else total_context_budget(param, system_prompt)
    caps = section_caps(param, "local", tb.total)
    m = param.model
    sections = {
        "entities": entity_section(entities, caps["entities"], dict(entity_hits), m),
        "relationships": relation_section(relations, caps["relationships"], m),
        "reports": report_section(reports, caps["reports"], m),
        "sources": sources_section(items, param, caps["sources"]),
    }
    return assemble(sections, param, "local", tb)
