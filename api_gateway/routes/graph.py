"""``/v1/graph``: stats, entity search, one entity with its neighbourhood, communities with their reports,
GraphML export."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Path, Query
from fastapi.responses import Response

from api_gateway.deps import GatewayDep, TenantDep
from api_gateway.entity_view import description_parts, source_documents
from api_gateway.errors import not_found
from api_gateway.routes.common import errors
from api_gateway.schemas import (
    CommunityListOut,
    CommunityOut,
    CommunityReportOut,
    CommunitySummary,
    EntityHit,
    EntityOut,
    EntitySearchOut,
    StatsOut,
)
from shared.infra.store.graph_export import graphml_bytes
from shared.infra.store.redis_graph import GraphStore

router = APIRouter(prefix="/v1/graph", tags=["graph"])
MAX_NEIGHBORS = 200
CommunityId = Annotated[str, Path(min_length=1, max_length=100, examples=["L0-1"])]


@router.get("/stats", response_model=StatsOut, responses=errors(401, 429), summary="Graph counts")
def graph_stats(gw: GatewayDep, who: TenantDep) -> StatsOut:
    return StatsOut(**GraphStore(gw.redis, who.tenant).stats())


@router.get("/entities", response_model=EntitySearchOut, responses=errors(401, 422, 429), summary="Search entities")
def graph_entities_search(gw: GatewayDep, who: TenantDep,
                          q: Annotated[str, Query(min_length=1, max_length=200, examples=["scro"])],
                          limit: Annotated[int, Query(ge=1, le=100)] = 20) -> EntitySearchOut:
    """Entities whose name contains ``q`` (case-insensitive): the exact name first, then prefix matches,
    then the rest, each by degree (most connected first)."""
    store = GraphStore(gw.redis, who.tenant)
    needle = q.strip().upper()
    matched = [n for n in store.all_entity_names() if needle in n.upper()]
    degrees = store.entity_degrees(matched)
    rank = sorted(matched, key=lambda n: (n.upper() != needle, not n.upper().startswith(needle), -degrees[n], n))
    found = store.entities(rank[:limit])
    items = [EntityHit(name=n, type=found[n].type, degree=degrees[n]) for n in rank[:limit] if n in found]
    return EntitySearchOut(q=q, total=len(matched), items=items)


@router.get("/communities", response_model=CommunityListOut, responses=errors(401, 422, 429),
            summary="Communities of one level")
def graph_communities(gw: GatewayDep, who: TenantDep, level: Annotated[int, Query(ge=0, le=100)] = 0,
                      limit: Annotated[int, Query(ge=1, le=1000)] = 200) -> CommunityListOut:
    """The communities of ``level`` (0 is the coarsest), best-rated report first, with each report's title."""
    store = GraphStore(gw.redis, who.tenant)
    reports = store.reports()
    rows = [c for c in store.communities().values() if c.level == level]
    rows.sort(key=lambda c: (-(reports[c.id].rating if c.id in reports else -1.0), -len(c.nodes), c.id))
    items = [CommunitySummary(id=c.id, level=c.level, size=len(c.nodes), parent=c.parent,
                              title=reports[c.id].title if c.id in reports else None,
                              rating=reports[c.id].rating if c.id in reports else None) for c in rows[:limit]]
    levels = {str(k): v for k, v in sorted(store.community_levels().items())}
    return CommunityListOut(level=level, levels=levels, total=len(rows), items=items)


@router.get("/communities/{community_id}", response_model=CommunityOut, responses=errors(401, 404, 429),
            summary="One community with its report")
def graph_community(gw: GatewayDep, who: TenantDep, community_id: CommunityId) -> CommunityOut:
    """Members, parent and children, and the community report (null until reports are generated)."""
    store = GraphStore(gw.redis, who.tenant)
    community = store.communities_by_ids([community_id]).get(community_id)
    if community is None:
        raise not_found("community")
    report = store.reports_by_ids([community_id]).get(community_id)
    report_out = None if report is None else CommunityReportOut(
        title=report.title, summary=report.summary, rating=report.rating,
        rating_explanation=report.rating_explanation, generated_by=report.generated_by,
        findings=[{"summary": f.summary, "explanation": f.explanation} for f in report.findings])
    return CommunityOut(id=community.id, level=community.level, parent=community.parent,
                        children=community.children, nodes=community.nodes, report=report_out)


@router.get("/entities/{name}", response_model=EntityOut, responses=errors(401, 404, 429), summary="One entity")
def graph_entity(gw: GatewayDep, who: TenantDep,
                 name: Annotated[str, Path(min_length=1, max_length=500, examples=["SCROOGE"])]) -> EntityOut:
    """Description, sources (chunks and documents), neighbours (strongest first) and communities.
    Names are matched as stored, then upper-cased (extraction normalises names to upper case).
    ``descriptions`` (and each neighbour's) is the description split into its distinct parts;
    ``source_documents`` names the documents with the pages their passages quote."""
    store = GraphStore(gw.redis, who.tenant)
    found = store.entities([name]) or store.entities([name.strip().upper()])
    if not found:
        raise not_found("entity")
    entity = next(iter(found.values()))
    relations = sorted(store.relations_of([entity.name]), key=lambda r: (-r.weight, r.src, r.tgt))
    neighbors = [{"name": r.tgt if r.src == entity.name else r.src, "description": r.description,
                  "descriptions": description_parts(r.description), "keywords": r.keywords, "weight": r.weight}
                 for r in relations[:MAX_NEIGHBORS]]
    return EntityOut(name=entity.name, type=entity.type, description=entity.description,
                     descriptions=description_parts(entity.description), degree=entity.degree,
                     sources={"chunks": entity.source_ids, "documents": entity.doc_ids},
                     source_documents=source_documents(store, entity), neighbors=neighbors,
                     communities=store.entity_communities(entity.name))


@router.get("/export", responses={200: {"content": {"application/graphml+xml": {}}, "description": "GraphML"},
                                  **errors(401, 422, 429)}, summary="Export the graph")
def graph_export(gw: GatewayDep, who: TenantDep, format: Literal["graphml"] = Query("graphml")) -> Response:  # noqa: A002
    data = graphml_bytes(GraphStore(gw.redis, who.tenant))
    return Response(data, media_type="application/graphml+xml",
                    headers={"Content-Disposition": f'attachment; filename="{who.tenant}.graphml"'})
