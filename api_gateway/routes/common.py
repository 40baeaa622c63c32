"""Helpers shared by the route modules."""

from __future__ import annotations

from typing import Annotated

from fastapi import Header

from api_gateway.errors import ErrorBody


def errors(*codes: int) -> dict:
    text = {400: "bad request", 401: "missing, unknown or revoked API key", 404: "not found (or another tenant's)",
            409: "conflict", 413: "body too large", 415: "unsupported media type", 422: "invalid input",
            429: "quota exceeded (see Retry-After)", 503: "not ready"}
    return {c: {"model": ErrorBody, "description": text.get(c, "error")} for c in codes}


IdempotencyKey = Annotated[str | None, Header(alias="Idempotency-Key", max_length=255,
                                              description="same key + same payload returns the same job")]

RETRY_AFTER_S = {"ingest": 2, "delete": 1, "query": 1}
