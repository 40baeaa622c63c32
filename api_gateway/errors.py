"""JSON errors for every 4xx/5xx: ``{"error": {"code": ..., "message": ...}}``, plus the body-size guard."""

from __future__ import annotations

import json
import logging

import redis
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from kombu.exceptions import OperationalError as BrokerUnreachable
from pydantic import BaseModel, ConfigDict, Field
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Receive, Scope, Send

from shared.infra.tenancy.quotas import QuotaExceeded

log = logging.getLogger("api_gateway")

_STATUS_CODES = {400: "bad_request", 401: "unauthorized", 403: "forbidden", 404: "not_found",
                 405: "method_not_allowed", 406: "not_acceptable", 409: "conflict", 413: "body_too_large",
                 415: "unsupported_media_type", 422: "invalid_request", 429: "rate_limited",
                 500: "internal_error", 503: "unavailable"}


_FASTAPI_BODY_ERROR = "There was an error parsing the body"
# The state Redis or the broker unreachable for a moment (restarting, loading its data, failing over): the client is
# told to retry (503 + Retry-After), as for any passing outage. A submission that failed half-way is safe to send
# again: its Idempotency-Key returns the same job, and the job watchdog enqueues a message that was not sent.
UNREACHABLE = (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError, redis.exceptions.ClusterDownError,
               redis.exceptions.TryAgainError, BrokerUnreachable)
UNREACHABLE_RETRY_S = 2


class FieldError(BaseModel):
    loc: list[str]
    msg: str
    type: str


class ErrorDetail(BaseModel):
    code: str = Field(description="stable machine-readable code, e.g. `validation_error`, `rate_limited`")
    message: str
    details: list[FieldError] | None = Field(None, description="400 `malformed_json` / 422 `validation_error` "
                                                                 "only: the offending fields")
    index: int | None = Field(None, description="ingestion only: the position of the offending document")
    refused: list[dict] | None = Field(None, description="ingestion only: every refused document, each "
                                                         "`{doc_id, name, index, stage, code, cause}`")


class ErrorBody(BaseModel):
    model_config = ConfigDict(json_schema_extra={
        "examples": [{"error": {"code": "invalid_api_key", "message": "unknown or revoked API key"}}]})

    error: ErrorDetail


class ApiError(Exception):
    def __init__(self, status: int, code: str, message: str, headers: dict[str, str] | None = None,
                 extra: dict | None = None):
        super().__init__(message)
        self.status, self.code, self.message = status, code, message
        self.headers = headers or {}
        self.extra = extra or {}


def not_found(what: str) -> ApiError:
    return ApiError(404, "not_found", f"{what} not found")


def error_response(status: int, code: str, message: str, headers: dict | None = None,
                   extra: dict | None = None) -> JSONResponse:
    body = {"error": {"code": code, "message": message, **(extra or {})}}
    return JSONResponse(body, status_code=status, headers=headers)


def _validation_parts(errors: list[dict]) -> tuple[int, str, str, list[dict]]:
    details = [{"loc": [str(p) for p in e.get("loc", ())], "msg": str(e.get("msg", "")), "type": e.get("type", "")}
               for e in errors]
    if any(d["type"] == "json_invalid" for d in details):
        return 400, "malformed_json", "request body is not valid JSON", details[:1]
    first = details[0] if details else {"loc": [], "msg": "invalid request"}
    where = ".".join(p for p in first["loc"] if p != "body") or "request"
    message = f"{where}: {first['msg']}" + (f" (and {len(details) - 1} more)" if len(details) > 1 else "")
    return 422, "validation_error", message, details[:20]


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(ApiError)
    async def _api_error(_request: Request, exc: ApiError):
        return error_response(exc.status, exc.code, exc.message, exc.headers, exc.extra)

    @app.exception_handler(QuotaExceeded)
    async def _quota(_request: Request, exc: QuotaExceeded):
        return error_response(429, exc.code, exc.message, {"Retry-After": str(exc.retry_after)})

    @app.exception_handler(RequestValidationError)
    async def _validation(_request: Request, exc: RequestValidationError):
        status, code, message, details = _validation_parts(list(exc.errors()))
        return error_response(status, code, message, extra={"details": details})

    @app.exception_handler(StarletteHTTPException)
    async def _http(_request: Request, exc: StarletteHTTPException):
        code = _STATUS_CODES.get(exc.status_code, "http_error")
        message = exc.detail if isinstance(exc.detail, str) else code.replace("_", " ")
        if exc.status_code == 400 and message == _FASTAPI_BODY_ERROR:  # e.g. a JSON body that is not UTF-8
            code, message = "malformed_json", "request body could not be parsed as UTF-8 JSON"
        return error_response(exc.status_code, code, message, getattr(exc, "headers", None))

    async def _unreachable(request: Request, exc: Exception):
        log.warning("%s %s: a backing service is unreachable: %r", request.method, request.url.path, exc)
        return error_response(503, "unavailable", "a backing service is unreachable for the moment; retry",
                              {"Retry-After": str(UNREACHABLE_RETRY_S)})

    for kind in UNREACHABLE:
        app.add_exception_handler(kind, _unreachable)

    @app.exception_handler(Exception)
    async def _unhandled(request: Request, exc: Exception):
        log.exception("unhandled error on %s %s", request.method, request.url.path)
        return error_response(500, "internal_error", "internal server error")


class BodySizeLimit:
    """Outermost ASGI guard: a declared Content-Length over the limit gets a JSON 413 before anything
    is read (streamed bodies without a length are cut off by FastAPI's own ``max_body_size``)."""

    def __init__(self, app: ASGIApp, max_body_bytes: int):
        self.app = app
        self.max_body_bytes = max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            for name, value in scope.get("headers", ()):
                if name == b"content-length":
                    try:
                        length = int(value)
                    except ValueError:
                        length = -1
                    if length > self.max_body_bytes or length < 0:
                        await self._reject(send, length)
                        return
        await self.app(scope, receive, send)

    async def _reject(self, send: Send, length: int) -> None:
        if length < 0:
            status, code, msg = 400, "bad_request", "invalid Content-Length header"
        else:
            status, code, msg = 413, "body_too_large", f"request body of {length} bytes exceeds {self.max_body_bytes}"
        body = json.dumps({"error": {"code": code, "message": msg}}).encode()
        await send({"type": "http.response.start", "status": status,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                                (b"connection", b"close")]})
        await send({"type": "http.response.body", "body": body})
