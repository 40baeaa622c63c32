"""A fresh gateway builds FastAPI's per-router matching contexts at start-up (``api_gateway.app.warm_routes``), so
its first query does not (FastAPI 0.16x builds an included router's on the first request routed into it)."""

from __future__ import annotations

from fastapi.testclient import TestClient


def test_the_gateway_builds_every_router_before_its_first_request(gw_env):
    from api_gateway.app import create_app, warm_routes

    app = create_app()
    routers = [r for r in app.router.routes if callable(getattr(r, "effective_candidates", None))]
    assert len(routers) >= 9  # one per routes module: if FastAPI drops the hook, the warm-up is a no-op; say so
    built = warm_routes(app)
    assert built >= len(routers)
    assert warm_routes(app) == built  # idempotent: built once, cached by FastAPI
    with TestClient(app) as client:  # the lifespan warms, then the app serves as before
        assert client.get("/healthz").status_code == 200
        assert client.get("/v1/jobs/nope").status_code == 401
