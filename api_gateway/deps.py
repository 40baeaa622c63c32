"""FastAPI dependencies: the gateway state, the calling tenant (API key + rate limit), the admin."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import APIKeyHeader, HTTPAuthorizationCredentials, HTTPBearer

from api_gateway.errors import ApiError
from api_gateway.state import Gateway
from shared.infra.tenancy.quotas import Limits, check_rate, effective_limits
from shared.infra.tenancy.tenants import Tenant

_api_key_header = APIKeyHeader(name="X-API-Key", auto_error=False, description="tenant or admin API key")
_bearer = HTTPBearer(auto_error=False, description="the same key as a bearer token")


def get_gateway(request: Request) -> Gateway:
    return request.app.state.gateway


GatewayDep = Annotated[Gateway, Depends(get_gateway)]


def presented_key(
    x_api_key: Annotated[str | None, Depends(_api_key_header)],
    bearer: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> str:
    key = x_api_key or (bearer.credentials if bearer else None)
    if not key:
        raise ApiError(401, "missing_api_key", "send an API key in X-API-Key or Authorization: Bearer",
                       {"WWW-Authenticate": "Bearer"})
    return key.strip()


KeyDep = Annotated[str, Depends(presented_key)]


@dataclass(frozen=True)
class Principal:
    tenant: str
    key_id: str
    record: Tenant
    limits: Limits


def current_tenant(gw: GatewayDep, key: KeyDep) -> Principal:
    """The tenant bound to the API key (never taken from the request), after the rate limit."""
    found = gw.tenants.authenticate(key)
    if found is None:
        raise ApiError(401, "invalid_api_key", "unknown or revoked API key", {"WWW-Authenticate": "Bearer"})
    tenant, key_id = found
    record = gw.tenants.get(tenant) or Tenant(id=tenant)
    limits = effective_limits(record.limits)
    check_rate(gw.redis, tenant, limits)
    return Principal(tenant, key_id, record, limits)


TenantDep = Annotated[Principal, Depends(current_tenant)]


def require_admin(gw: GatewayDep, key: KeyDep) -> None:
    if not gw.is_admin(key):
        raise ApiError(401, "invalid_admin_key", "this endpoint needs the admin key", {"WWW-Authenticate": "Bearer"})


AdminDep = Depends(require_admin)
