"""HTTP metrics of the gateway: ``graphfleet_http_requests_total{route,method,status}`` and
``graphfleet_http_request_duration_seconds{route,method}``.

``route`` is the matched route's template (``/v1/jobs/{job_id}``), never the raw path, so ids and tenants
never become label values; requests that matched no route (404s, bodies refused before routing) are
``route="unmatched"``. ``status`` is the class (``2xx``..``5xx``). Pure ASGI,
outside every other middleware (``GatewayApp.build_middleware_stack``), so 413s and 500s are counted too.
"""

from __future__ import annotations

import time

from shared.infra.observability.metrics import record_http

METHODS = frozenset({"GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"})


def route_label(scope: dict) -> str:
    route = scope.get("route")
    path = getattr(route, "path_format", None) or getattr(route, "path", None)
    if path:
        return path[:100]
    return "unmatched"


class HttpMetrics:
    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = {"code": 500}

        async def send_wrapper(message):
            if message["type"] == "http.response.start":
                status["code"] = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, send_wrapper)
        finally:
            method = scope.get("method", "GET")
            record_http(route_label(scope), method if method in METHODS else "other", status["code"],
                        time.perf_counter() - started)
