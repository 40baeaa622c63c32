"""``/v1/usage``: the tenant's usage ledger (the billing source)."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Query

from api_gateway.deps import GatewayDep, TenantDep
from api_gateway.errors import ApiError
from api_gateway.routes.common import errors
from api_gateway.schemas import UsageOut
from shared.infra.tenancy.ledger import parse_time, usage_report
from shared.public_json import usage_json

router = APIRouter(prefix="/v1/usage", tags=["usage"])
TimeParam = Annotated[str | None, Query(max_length=40, description="ISO date/datetime (UTC) or unix seconds",
                                        examples=["2024-06-01", "1717200000"])]


def _time(value: str | None, name: str, end: bool) -> float | None:
    try:
        return parse_time(value, end=end)
    except ValueError:
        raise ApiError(422, "invalid_time", f"{name}: expected an ISO date/datetime or unix seconds") from None


@router.get("", response_model=UsageOut, response_model_by_alias=True, responses=errors(401, 422, 429),
            summary="Usage ledger")
def get_usage(gw: GatewayDep, who: TenantDep, from_: Annotated[TimeParam, Query(alias="from")] = None,
              to: TimeParam = None, group_by: Literal["day", "model", "stage"] | None = None) -> UsageOut:
    """Calls, tokens (prompt, completion), cost and cache hits in [from, to] (inclusive; a date ``to``
    covers that whole day), equal to the sum of the per-call usage records."""
    start, end = _time(from_, "from", False), _time(to, "to", True)
    if start is not None and end is not None and start > end:
        raise ApiError(422, "invalid_time_range", "from is after to")
    report = usage_report(gw.redis, who.tenant, start, end, group_by)
    return UsageOut(**usage_json(who.tenant, start, end, group_by, report))
