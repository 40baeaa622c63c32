"""``GET /metrics``: Prometheus exposition of every graphfleet process on this host plus queue depths.

Unauthenticated, like ``/healthz``: expose it on the internal network only (the series carry no tenant
ids unless ``GRAPHFLEET_METRICS_TENANT_ALLOWLIST`` opts some in).
"""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import Response

from api_gateway.deps import GatewayDep
from shared.infra.metrics import metrics_response

router = APIRouter(tags=["health"])


@router.get("/metrics", summary="Prometheus metrics", response_class=Response,
            responses={200: {"content": {"text/plain": {}}}})
async def prometheus_metrics(gw: GatewayDep) -> Response:
    body, content_type = await run_in_threadpool(metrics_response, gw.redis)
    return Response(content=body, media_type=content_type)
