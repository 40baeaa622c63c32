"""``/v1/tenants``: tenants and API keys (admin key only)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path

from api_gateway.deps import AdminDep, GatewayDep, TenantDep
from api_gateway.errors import ApiError, not_found
from api_gateway.routes.common import errors
from api_gateway.schemas import KeyCreate, KeyOut, KeyRevoked, TenantCreate, TenantList, TenantOut
from shared.infra.tenancy.tenants import Tenant, TenantExists

router = APIRouter(prefix="/v1", tags=["tenants"])
TenantId = Annotated[str, Path(min_length=1, max_length=63, examples=["acme"])]


def _tenant_out(t: Tenant) -> TenantOut:
    return TenantOut(id=t.id, name=t.name, tier=t.tier, preset=t.preset, limits=t.limits, created_at=t.created_at)


@router.post("/tenants", status_code=201, response_model=TenantOut, dependencies=[AdminDep],
             responses=errors(401, 409, 422), summary="Create a tenant (admin)")
def create_tenant(gw: GatewayDep, body: TenantCreate) -> TenantOut:
    record = Tenant(id=body.id or gw.tenants.new_id(), name=body.name, tier=body.tier, preset=body.preset,
                    limits=body.limits)
    try:
        return _tenant_out(gw.tenants.create(record))
    except TenantExists:
        raise ApiError(409, "tenant_exists", f"tenant {record.id!r} already exists") from None


@router.get("/tenants", response_model=TenantList, dependencies=[AdminDep], responses=errors(401),
            summary="Every tenant (admin)")
def list_tenants(gw: GatewayDep) -> TenantList:
    """All tenant records, ordered by id (the registry holds ids only; each record is read once)."""
    items = [_tenant_out(t) for t in gw.tenants.all()]
    return TenantList(items=items, total=len(items))


@router.get("/tenants/{tenant_id}", response_model=TenantOut, dependencies=[AdminDep],
            responses=errors(401, 404), summary="A tenant (admin)")
def get_tenant(gw: GatewayDep, tenant_id: TenantId) -> TenantOut:
    record = gw.tenants.get(tenant_id)
    if record is None:
        raise not_found("tenant")
    return _tenant_out(record)


@router.post("/tenants/{tenant_id}/keys", status_code=201, response_model=KeyOut, dependencies=[AdminDep],
             responses=errors(401, 404, 422), summary="Issue an API key (admin)")
def create_key(gw: GatewayDep, tenant_id: TenantId, body: KeyCreate | None = None) -> KeyOut:
    if gw.tenants.get(tenant_id) is None:
        raise not_found("tenant")
    issued = gw.tenants.issue_key(tenant_id, (body or KeyCreate()).name)
    return KeyOut(key_id=issued.key_id, tenant=issued.tenant, name=issued.name, api_key=issued.api_key,
                  created_at=issued.created_at)


@router.delete("/tenants/{tenant_id}/keys/{key_id}", response_model=KeyRevoked, dependencies=[AdminDep],
               responses=errors(401, 404), summary="Revoke an API key (admin)")
def revoke_key(gw: GatewayDep, tenant_id: TenantId,
               key_id: Annotated[str, Path(min_length=1, max_length=64)]) -> KeyRevoked:
    if gw.tenants.get(tenant_id) is None or not gw.tenants.revoke_key(tenant_id, key_id):
        raise not_found("key")
    return KeyRevoked(key_id=key_id, tenant=tenant_id, revoked=True)


@router.get("/tenant", response_model=TenantOut, tags=["tenants"], responses=errors(401, 429),
            summary="The calling tenant")
def whoami(who: TenantDep) -> TenantOut:
    return _tenant_out(who.record)
