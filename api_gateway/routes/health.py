"""``/healthz`` (process up) and ``/readyz`` (state Redis and broker reachable, every queue consumed)."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse

from api_gateway.deps import GatewayDep
from api_gateway.routes.common import errors
from api_gateway.schemas import ReadyOut

router = APIRouter(tags=["health"])
READY_RETRY_AFTER_S = 5  # the readiness probe is cached this long (api_gateway/state.py READY_CACHE_S)


@router.get("/healthz", summary="Process is up", responses={200: {"content": {"application/json": {
    "example": {"status": "ok"}}}}})
def healthz() -> dict:
    return {"status": "ok"}


@router.get("/readyz", response_model=ReadyOut, responses=errors(503), summary="Ready to serve")
async def readyz(gw: GatewayDep) -> JSONResponse:
    state = await run_in_threadpool(gw.readiness)
    if state["ready"]:
        return JSONResponse(state)
    missing = sorted(q for q, ok in state["queues"].items() if not ok)
    if not state["redis"]:
        message = "redis unreachable"
    elif not state.get("broker", True):
        message = "broker unreachable"
    else:
        message = f"no worker consuming: {', '.join(missing)}"
    return JSONResponse({"error": {"code": "not_ready", "message": message}, **state}, status_code=503,
                        headers={"Retry-After": str(READY_RETRY_AFTER_S)})
