"""The FastAPI application factory: ``uvicorn api_gateway.app:create_app --factory``."""

from __future__ import annotations

from contextlib import asynccontextmanager

from fastapi import FastAPI

from api_gateway.errors import BodySizeLimit, install_error_handlers
from api_gateway.routes import admin, documents, graph, health, jobs, metrics, queries, usage
from api_gateway.state import Gateway
from shared.config import get_settings
from shared.infra.job_metrics import JobMetrics
from shared.infra.jobs import add_job_listener

DESCRIPTION = """GraphRAG over a fleet of Celery workers.

Authenticate with a tenant API key (`X-API-Key: gfk_...` or `Authorization: Bearer gfk_...`); the tenant
always comes from the key. Submissions return **202** with a job/query id and a `Location` to poll.
Every error is `{"error": {"code": "...", "message": "..."}}`; quota errors are 429 with `Retry-After`.
"""


class GatewayApp(FastAPI):
    """FastAPI with the body-size guard outside everything else, so an oversized request gets a JSON
    413 before any of it is read."""

    def build_middleware_stack(self):
        return BodySizeLimit(super().build_middleware_stack(), self.state.gateway.max_body_bytes)


def create_app(settings=None, max_body_bytes: int | None = None) -> FastAPI:
    settings = settings or get_settings()
    gateway = Gateway.build(settings, max_body_bytes)
    add_job_listener(JobMetrics())

    @asynccontextmanager
    async def lifespan(_app: FastAPI):
        yield
        await gateway.aclose()
        gateway.redis.close()

    app = GatewayApp(title="graphfleet gateway", version="0.1.0", description=DESCRIPTION, lifespan=lifespan,
                     max_body_size=gateway.max_body_bytes)
    app.state.gateway = gateway
    install_error_handlers(app)
    for module in (health, metrics, admin, documents, jobs, queries, usage, graph):
        app.include_router(module.router)
    return app
