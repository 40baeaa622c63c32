"""``GET /metrics``: Prometheus exposition of every graphfleet process on this host plus queue depths.

With ``GRAPHFLEET_METRICS_TOKEN`` set (docker-compose.yml requires it) the endpoint answers only
``Authorization: Bearer <token>`` (Prometheus: ``authorization.credentials_file`` in prometheus.yml); without
it, like ``/healthz``, it is open: then expose the port on the internal network only. The series carry no
tenant ids unless ``GRAPHFLEET_METRICS_TENANT_ALLOWLIST`` opts some in.
"""

from __future__ import annotations

import hmac

from fastapi import APIRouter, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import Response

from api_gateway.deps import GatewayDep
from api_gateway.errors import ApiError
from shared.infra.observability.metrics import metrics_response

router = APIRouter(tags=["health"])


def check_metrics_token(expected: str | None, authorization: str | None) -> None:
    """Raise a 401 unless ``authorization`` is ``Bearer <expected>`` (no check when no token is configured)."""
    if not expected:
        return
    scheme, _, presented = (authorization or "").partition(" ")
    if scheme.lower() != "bearer" or not hmac.compare_digest(presented.strip().encode(), expected.encode()):
        raise ApiError(401, "invalid_metrics_token", "GET /metrics needs Authorization: Bearer <metrics token>",
                       {"WWW-Authenticate": "Bearer"})


@router.get("/metrics", summary="Prometheus metrics", response_class=Response,
            responses={200: {"content": {"text/plain": {}}}})
async def prometheus_metrics(gw: GatewayDep, request: Request) -> Response:
    check_metrics_token(getattr(gw.settings, "metrics_token", None), request.headers.get("authorization"))
    body, content_type = await run_in_threadpool(metrics_response, gw.redis)
    return Response(content=body, media_type=content_type)
