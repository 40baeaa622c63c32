"""Gateway test fixtures: the gateway in-process (TestClient) on its own Redis database index."""

from __future__ import annotations

import pytest

from shared.config import reset_settings_cache
from shared.infra.redis_conn import connect
from tests.gateway.helpers import ADMIN, db_url, make_client, new_tenant


@pytest.fixture()
def gw_redis(redis_server):
    client = connect(db_url(redis_server))
    client.flushdb()
    yield client
    client.close()


@pytest.fixture()
def gw_env(monkeypatch, redis_server, gw_redis, tmp_path):
    monkeypatch.setenv("GRAPHFLEET_REDIS_URL", db_url(redis_server))
    monkeypatch.setenv("GRAPHFLEET_ADMIN_KEY", ADMIN)
    monkeypatch.setenv("GRAPHFLEET_DATA_DIR", str(tmp_path))
    reset_settings_cache()
    yield monkeypatch
    reset_settings_cache()


@pytest.fixture()
def api(gw_env):
    with make_client() as client:
        yield client


@pytest.fixture()
def alice(api):
    return new_tenant(api, "alice")


@pytest.fixture()
def bob(api):
    return new_tenant(api, "bob")


@pytest.fixture(scope="package")
def live(redis_server, tmp_path_factory):
    """A real stack for the end-to-end tests: worker processes, the gateway subprocess (uvicorn) and an
    LLM simulator of its own whose latency a test may raise (``live.slow_llm``)."""
    from tests.gateway.live import start_live

    stack = start_live(redis_server.url, tmp_path_factory.mktemp("gateway-e2e"))
    yield stack
    stack.stop()
