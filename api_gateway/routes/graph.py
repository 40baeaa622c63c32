"""``/v1/graph``: stats, one entity with its neighbourhood, GraphML export."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Path, Query
from fastapi.responses import Response

from api_gateway.deps import GatewayDep, TenantDep
from api_gateway.errors import not_found
from api_gateway.routes.common import errors
from api_gateway.schemas import EntityOut, StatsOut
from shared.infra.graph_export import graphml_bytes
from shared.infra.store.redis_graph import GraphStore

router = APIRouter(prefix="/v1/graph", tags=["graph"])
MAX_NEIGHBORS = 200


@router.get("/stats", response_model=StatsOut, responses=errors(401, 429), summary="Graph counts")
def graph_stats(gw: GatewayDep, who: TenantDep) -> StatsOut:
    return StatsOut(**GraphStore(gw.redis, who.tenant).stats())


@router.get("/entities/{name}", response_model=EntityOut, responses=errors(401, 404, 429), summary="One entity")
def graph_entity(gw: GatewayDep, who: TenantDep,
                 name: Annotated[str, Path(min_length=1, max_length=500, examples=["SCROOGE"])]) -> EntityOut:
    """Description, sources (chunks and documents), neighbours (strongest first) and communities.
    Names are matched as stored, then upper-cased (extraction normalises names to upper case)."""
    store = GraphStore(gw.redis, who.tenant)
    found = store.entities([name]) or store.entities([name.strip().upper()])
    if not found:
        raise not_found("entity")
    entity = next(iter(found.values()))
    relations = sorted(store.relations_of([entity.name]), key=lambda r: (-r.weight, r.src, r.tgt))
    neighbors = [{"name": r.tgt if r.src == entity.name else r.src, "description": r.description,
                  "keywords": r.keywords, "weight": r.weight} for r in relations[:MAX_NEIGHBORS]]
    return EntityOut(name=entity.name, type=entity.type, description=entity.description, degree=entity.degree,
                     sources={"chunks": entity.source_ids, "documents": entity.doc_ids}, neighbors=neighbors,
                     communities=store.entity_communities(entity.name))


@router.get("/export", responses={200: {"content": {"application/graphml+xml": {}}, "description": "GraphML"},
                                  **errors(401, 422, 429)}, summary="Export the graph")
def graph_export(gw: GatewayDep, who: TenantDep, format: Literal["graphml"] = Query("graphml")) -> Response:  # noqa: A002
    data = graphml_bytes(GraphStore(gw.redis, who.tenant))
    return Response(data, media_type="application/graphml+xml",
                    headers={"Content-Disposition": f'attachment; filename="{who.tenant}.graphml"'})
