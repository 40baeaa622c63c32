"""A fresh gateway builds FastAPI's per-router matching contexts at start-up (``api_gateway.app.warm_routes``), so
its first query does not (FastAPI 0.16x builds an included router's on the first request routed into it)."""

from __future__ import annotations

from fastapi.testclient import TestClient


def test_the_gateway_builds_every_router_before_its_first_request(gw_env, caplog):
    from api_gateway.app import create_app, warm_routes

    app = create_app()
    routers = [r for r in app.router.routes if callable(getattr(r, "effective_candidates", None))]
    assert len(routers) >= 9  # one per routes module: if FastAPI drops the hook, the warm-up is a no-op; say so
    built = warm_routes(app)
    assert built >= len(routers)
    assert warm_routes(app) == built  # idempotent: built once, cached by FastAPI
    from fastapi import routing

    from api_gateway.routes import queries

    submit = next(r for r in queries.router.routes if r.path == "/v1/queries" and "POST" in r.methods)
    # each endpoint's context for error messages (its source read with ``inspect``) was read before any request
    assert id(submit.dependant.call) in routing._endpoint_context_cache
    with TestClient(app) as client:  # the lifespan warms, then the app serves as before
        # every step of the warm-up ran (Celery, both Redis clients, a ``?wait``'s subscription): none failed
        assert not [r for r in caplog.records if "warm-up failed" in r.getMessage()]
        assert client.get("/healthz").status_code == 200
        assert client.get("/v1/jobs/nope").status_code == 401


def test_the_gateway_declares_every_queue_before_its_first_send(tmp_path):
    """The first publish to a queue declares it on a fresh broker connection (~8 ms of a fresh gateway's first
    query): ``LockedCelery.warm`` declares them all at start-up, so the first send declares nothing, and the
    message still lands on its queue. A Redis of its own: no worker of another test consumes the message."""
    from api_gateway.state import LockedCelery
    from shared.config import get_settings
    from shared.infra.messaging.messages import RunQuery, send
    from shared.infra.messaging.queueing import QUERY, QUEUES, ROUTES, make_celery, settings_for
    from shared.infra.redis.conn import EmbeddedRedis, connect

    server = EmbeddedRedis(tmp_path / "redis", persist=False).start()
    try:
        celery = LockedCelery(make_celery(settings_for(get_settings(), server.url, broker=server.url)))
        celery.warm()
        queues = celery.app.amqp.queues
        assert set(QUEUES) <= set(queues)
        with celery.app.producer_or_acquire() as producer:
            declared = set(producer.connection.declared_entities)  # kombu keeps the hash of each declared entity
        assert {hash(queues[name]) for name in QUEUES} <= declared
        # it built messages to warm the sending code and sent none: the broker holds only the queues' bindings
        assert all(k.startswith(b"_kombu.binding") for k in connect(server.url).keys("*"))
        send(celery, RunQuery(tenant="acme", job_id="q-warm-1"))
        with celery.app.producer_or_acquire() as producer:
            assert set(producer.connection.declared_entities) == declared  # the send declared nothing new
        assert connect(server.url).llen(ROUTES[QUERY]) == 1  # kombu's Redis transport: a queue is a list
    finally:
        server.stop()


def test_the_gateway_classifies_every_dependency_and_names_real_routes_as_hot(gw_env, caplog):
    """Before its first request: FastAPI's check of each dependency's callable (generator? coroutine?, made with
    ``inspect`` on the first request that solves it) is cached for the query route's whole tree; and the hot
    routes whose metric series are created at start-up are routes of the app (a renamed route would leave its
    series unprimed)."""
    from fastapi.dependencies import models

    from api_gateway.app import HOT_ROUTES, create_app
    from api_gateway.routes import documents, jobs, queries

    routes = [r for module in (documents, jobs, queries) for r in module.router.routes]
    assert set(HOT_ROUTES) <= {(r.path, m) for r in routes for m in r.methods}
    app = create_app()
    with TestClient(app) as client:
        submit = next(r for r in routes if r.path == "/v1/queries" and "POST" in r.methods)
        checks = (models._is_gen_callable_cached, models._is_async_gen_callable_cached,
                  models._is_coroutine_callable_cached)
        before = [check.cache_info() for check in checks]
        todo, calls = [submit.dependant], 0
        while todo:
            node = todo.pop()
            if node.call is not None:
                calls += 1
                models._is_gen_callable(node.call), models._is_async_gen_callable(node.call)
                models._is_coroutine_callable(node.call)
            todo.extend(node.dependencies)
        after = [check.cache_info() for check in checks]
        assert calls >= 4  # the endpoint, the gateway, the tenant and its key
        assert [a.misses for a in after] == [b.misses for b in before]  # every one was classified at start-up
        assert all(a.hits >= b.hits + calls for a, b in zip(after, before, strict=True))
        assert not [r for r in caplog.records if "metric series failed" in r.getMessage()]  # primed at start-up
        assert client.get("/healthz").status_code == 200
