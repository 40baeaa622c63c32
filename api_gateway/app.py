"""The FastAPI application factory: ``uvicorn api_gateway.app:create_app --factory``."""

from __future__ import annotations

import logging
from contextlib import asynccontextmanager

from fastapi import FastAPI

from api_gateway.docs_ui import install_docs
from api_gateway.errors import BodySizeLimit, install_error_handlers
from api_gateway.http_metrics import HttpMetrics
from api_gateway.openapi import install_openapi, operation_id
from api_gateway.routes import admin, documents, graph, health, jobs, metrics, queries, query_events, usage
from api_gateway.routes.ui import install_ui
from api_gateway.state import Gateway
from shared.config import get_settings
from shared.infra.jobs.store import add_job_listener
from shared.infra.observability.job_metrics import JobMetrics
from shared.infra.observability.log_setup import configure_logging
from shared.infra.observability.metrics import prime_gateway_series
from shared.infra.observability.tracing import flush as flush_traces
from shared.infra.observability.tracing import instrument_gateway

log = logging.getLogger(__name__)

DESCRIPTION = """GraphRAG over a fleet of Celery workers.

Authenticate with a tenant API key (`X-API-Key: gfk_...` or `Authorization: Bearer gfk_...`); the tenant
always comes from the key. Submissions return **202** with a job/query id and a `Location` to poll.
Every error is `{"error": {"code": "...", "message": "..."}}`; quota errors are 429 with `Retry-After`.
"""


class GatewayApp(FastAPI):
    """FastAPI with the body-size guard outside everything else, so an oversized request gets a JSON
    413 before any of it is read."""

    def build_middleware_stack(self):
        # HttpMetrics outermost: refused and failed requests are counted too (api_gateway/http_metrics.py)
        return HttpMetrics(BodySizeLimit(super().build_middleware_stack(), self.state.gateway.max_body_bytes))


# (route template, method) a client's queries and jobs go through: their metric series are created at start-up
HOT_ROUTES = (("/v1/queries", "POST"), ("/v1/queries/{query_id}", "GET"), ("/v1/jobs/{job_id}", "GET"),
              ("/v1/documents", "POST"))


def warm_routes(app: FastAPI) -> int:
    """Build FastAPI's matching contexts of the included routers now: FastAPI (0.16x) builds a router's on the
    first request routed into it, which a fresh gateway's first query would pay; each endpoint's context
    for error messages (its source file and line, read with ``inspect`` on the first request to it); and the
    kind of each dependency's callable (``_classify``).
    Best effort: a FastAPI without them has nothing to build. Returns how many routers were built."""
    built, todo = 0, list(app.router.routes)
    while todo:
        route = todo.pop()
        _endpoint_context(route)
        _classify(getattr(route, "dependant", None))
        build = getattr(route, "effective_candidates", None)
        if callable(build):
            try:
                todo.extend(build())
            except Exception:  # noqa: BLE001 - FastAPI internals changed: the first request builds them
                return built
            built += 1
    return built


def _endpoint_context(route) -> None:
    from fastapi import routing

    extract, call = getattr(routing, "_extract_endpoint_context", None), getattr(route, "endpoint", None)
    if callable(extract) and call is not None:
        try:
            extract(getattr(getattr(route, "dependant", None), "call", None) or call)
        except Exception:  # noqa: BLE001 - FastAPI internals changed: the first request reads it
            pass


def _classify(dependant) -> None:
    """FastAPI (0.16x) tells, with ``inspect``, whether each dependency's callable is a generator or a coroutine
    function the first time a request solves it (``fastapi.dependencies.models``, a cache per callable): walked
    here for a route's whole dependency tree (its endpoint, the tenant and key dependencies)."""
    from fastapi.dependencies import models

    names = ("_is_gen_callable", "_is_async_gen_callable", "_is_coroutine_callable")
    checks = [check for check in (getattr(models, name, None) for name in names) if callable(check)]
    todo = [dependant] if dependant is not None else []
    while todo:
        node = todo.pop()
        call = getattr(node, "call", None)
        try:
            for check in checks if call is not None else ():
                check(call)
        except Exception:  # noqa: BLE001 - FastAPI internals changed: the first request classifies
            return
        todo.extend(getattr(node, "dependencies", None) or ())


def _prime_series() -> None:
    """The hot routes' metric series, at zero, before the first submission writes them. Best effort: a metrics
    directory that cannot be written fails the first request's metrics as before, not the gateway's start."""
    try:
        prime_gateway_series(HOT_ROUTES)
    except Exception:  # noqa: BLE001
        log.warning("priming the gateway's metric series failed", exc_info=True)


def create_app(settings=None, max_body_bytes: int | None = None) -> FastAPI:
    settings = settings or get_settings()
    gateway = Gateway.build(settings, max_body_bytes)
    settings.check_llm_mode()  # production without an LLM: GRAPHFLEET_LLM_FREE=true or refuse to start
    add_job_listener(JobMetrics())

    @asynccontextmanager
    async def lifespan(_app: FastAPI):
        gateway.draining.install()  # SIGTERM/SIGINT answer held ?wait requests at once (api_gateway/draining.py)
        await gateway.warm()  # the first query must not pay for the Celery producer and Redis connections
        warm_routes(_app)
        _prime_series()
        yield
        await gateway.aclose()
        gateway.redis.close()
        flush_traces()  # uvicorn re-raises SIGTERM after shutdown: atexit hooks would not run

    app = GatewayApp(title="graphfleet gateway", version="0.1.0", description=DESCRIPTION, lifespan=lifespan,
                     max_body_size=gateway.max_body_bytes, docs_url=None, redoc_url=None,
                     generate_unique_id_function=operation_id)
    app.state.gateway = gateway
    install_error_handlers(app)
    install_openapi(app)  # exact error models, headers and stable operation ids (api_gateway/openapi.py)
    configure_logging(settings)  # GRAPHFLEET_LOG_FORMAT=json (shared/infra/observability/log_setup.py)
    instrument_gateway(app, settings)  # GRAPHFLEET_OTEL_ENABLED (shared/infra/observability/tracing.py)
    install_docs(app)  # Swagger UI from local assets, no CDN
    for module in (health, metrics, admin, documents, jobs, queries, query_events, usage, graph):
        app.include_router(module.router)
    install_ui(app)  # /ui: the graph explorer, local assets only (api_gateway/routes/ui.py)
    return app
