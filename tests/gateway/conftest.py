"""Gateway test fixtures: the gateway in-process (TestClient) on its own Redis database index; for the end-to-end
tests, the live stack and the corpora it ingests once for the whole package."""

from __future__ import annotations

import pytest

from shared.config import reset_settings_cache
from shared.infra.redis.conn import connect
from tests.gateway.e2e_corpus import SYNTHETIC, texts
from tests.gateway.helpers import ADMIN, db_url, make_client, new_tenant, purge_broker


@pytest.fixture()
def gw_redis(redis_server):
    client = connect(db_url(redis_server))
    client.flushdb()
    if redis_server.gateway_broker_url:  # state and broker apart: the broker's queues are emptied too
        purge_broker(redis_server.gateway_broker_url)
    yield client
    client.close()


@pytest.fixture()
def gw_env(monkeypatch, redis_server, gw_redis, tmp_path):
    monkeypatch.setenv("GRAPHFLEET_REDIS_URL", db_url(redis_server))
    if redis_server.gateway_broker_url:  # state and broker apart (tests/conftest.py Backend)
        monkeypatch.setenv("GRAPHFLEET_BROKER_URL", redis_server.gateway_broker_url)
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

    stack = start_live(redis_server.url, tmp_path_factory.mktemp("gateway-e2e"), redis_server.broker_url)
    yield stack
    stack.stop()


# ---------------------------------------------------------------- end-to-end corpora (ingested once)
@pytest.fixture(scope="package")
def carol(live):
    """A tenant with document A ingested through the gateway (JSON batch)."""
    api = live.new_tenant("carol")
    a, _b, _ = texts()
    r = api.ingest(a, ids=["carol-a"])
    assert r.status_code == 202, r.text
    body = r.json()
    assert r.headers["Location"] == f"/v1/jobs/{body['job_id']}" == body["location"]
    view = api.wait_job(body["job_id"])
    assert view["status"] == "succeeded", view
    return {"api": api, "job_id": body["job_id"], "view": view, "queries": {}}


@pytest.fixture(scope="package")
def synthetic(live):
    """A tenant with an invented corpus (unique names), uploaded as .md/.txt files, and one query."""
    api = live.new_tenant("syn")
    files = [("files", (name, text.encode(), "text/plain")) for name, text in SYNTHETIC.items()]
    r = api.post("/v1/documents", files=files)
    assert r.status_code == 202, r.text
    view = api.wait_job(r.json()["job_id"])
    assert view["status"] == "succeeded", view
    query = api.query(mode="local", query="Who is Velmora Thistlewick?")
    assert query["status"] == "succeeded", query
    docs = api.get("/v1/documents").json()["items"]
    return {"api": api, "job_id": r.json()["job_id"], "query_id": query["query_id"],
            "doc_ids": [d["id"] for d in docs]}
