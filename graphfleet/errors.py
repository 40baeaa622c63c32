"""Exceptions of the graphfleet client: every API error carries the gateway's ``{"error": {"code", "message"}}``."""

from __future__ import annotations

from typing import Any


class GraphfleetError(Exception):
    """Base class of every error the client raises."""


class TransportError(GraphfleetError):
    """The gateway could not be reached (connection refused, DNS, TLS, timeout)."""


class ApiError(GraphfleetError):
    """An error response: ``status`` (HTTP), ``code`` and ``message`` (the body's ``error``), ``details``."""

    def __init__(self, status: int, code: str, message: str, details: Any = None, retry_after: float | None = None):
        super().__init__(f"{status} {code}: {message}")
        self.status, self.code, self.message = status, code, message
        self.details, self.retry_after = details, retry_after


class BadRequestError(ApiError):
    """400 or 422: the request is invalid (``details`` lists the offending fields when the API gives them)."""


class AuthError(ApiError):
    """401/403: missing, unknown or revoked key, or an admin endpoint called without the admin key."""


class NotFoundError(ApiError):
    """404: no such tenant, key, job, query, document or entity (or another tenant's)."""


class ConflictError(ApiError):
    """409: e.g. the tenant exists, or an Idempotency-Key reused with another payload."""


class RateLimitedError(ApiError):
    """429 after the client's retries: a quota or rate limit (``retry_after`` seconds)."""


class UnavailableError(ApiError):
    """503 after the client's retries (not ready, Redis down)."""


_BY_STATUS = {400: BadRequestError, 422: BadRequestError, 401: AuthError, 403: AuthError, 404: NotFoundError,
              409: ConflictError, 429: RateLimitedError, 503: UnavailableError}


def error_for(status: int, body: Any, text: str = "", retry_after: float | None = None) -> ApiError:
    """The exception for an error response (``body``: its parsed JSON, or None)."""
    err = body.get("error") if isinstance(body, dict) else None
    if isinstance(err, dict):
        code, message, details = str(err.get("code", "error")), str(err.get("message", "")), err.get("details")
    else:
        code, message, details = "http_error", (text or "")[:300], None
    return _BY_STATUS.get(status, ApiError)(status, code, message, details, retry_after)
