"""Helpers shared by the route modules."""

from __future__ import annotations

from typing import Annotated

from fastapi import Header, Query

from api_gateway.errors import ErrorBody
from api_gateway.state import Gateway
from shared.infra.jobs.status import AsyncJobStatus

MAX_WAIT_S = 60.0  # a request held with ``?wait`` answers after at most this long
WaitSeconds = Annotated[float, Query(ge=0, description="hold up to this many seconds (capped at 60)")]


def errors(*codes: int) -> dict:
    text = {400: "bad request", 401: "missing, unknown or revoked API key", 404: "not found (or another tenant's)",
            409: "conflict", 413: "body too large", 415: "unsupported media type", 422: "invalid input",
            429: "quota exceeded (see Retry-After)", 503: "not ready"}
    return {c: {"model": ErrorBody, "description": text.get(c, "error")} for c in codes}


IdempotencyKey = Annotated[str | None, Header(alias="Idempotency-Key", max_length=255,
                                              description="same key + same payload returns the same job")]

RETRY_AFTER_S = {"ingest": 2, "delete": 1, "query": 1}


async def wait_until_finished(gw: Gateway, tenant: str, job_id: str, seconds: float) -> bool:
    """Wait (at most ``MAX_WAIT_S``) for the job or query to end, woken by its end-of-job message, with the asyncio
    Redis client (never blocks the event loop); whether it ended. It ends early, False, when the gateway is
    stopping."""
    wait = AsyncJobStatus(gw.aredis(), tenant).wait_finished(job_id, min(seconds, MAX_WAIT_S))
    return await gw.draining.until(wait)  # a stopping gateway answers at once (api_gateway/draining.py)
