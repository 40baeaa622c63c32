"""The gateway while the state Redis is down (restarting, loading its data): every request is answered 503
``unavailable`` with ``Retry-After``, which a client retries, never a 500; once Redis is back it answers as before."""

from __future__ import annotations

from shared.config import reset_settings_cache
from shared.infra.redis.conn import EmbeddedRedis
from tests.gateway.helpers import ADMIN, make_client, new_tenant


def test_the_gateway_answers_a_retryable_503_while_the_state_redis_is_down(tmp_path, monkeypatch):
    server = EmbeddedRedis(tmp_path / "redis").start()  # persisted: the restart keeps the tenant and its key
    for name, value in (("GRAPHFLEET_REDIS_URL", server.url), ("GRAPHFLEET_BROKER_URL", ""),
                        ("GRAPHFLEET_ADMIN_KEY", ADMIN), ("GRAPHFLEET_DATA_DIR", str(tmp_path))):
        monkeypatch.setenv(name, value)
    reset_settings_cache()
    try:
        with make_client() as api:
            headers = new_tenant(api, "outage")["headers"]
            server.stop()
            for method, path, body in (("GET", "/v1/jobs", None), ("GET", "/v1/usage", None),
                                       ("POST", "/v1/documents", {"documents": [{"text": "Ada wrote notes."}]}),
                                       ("POST", "/v1/queries", {"mode": "naive", "query": "Who wrote notes?"})):
                r = api.request(method, path, json=body, headers=headers)
                assert r.status_code == 503, (method, path, r.status_code, r.text)
                assert r.json()["error"]["code"] == "unavailable"
                assert int(r.headers["Retry-After"]) > 0
            server.start()
            r = api.get("/v1/jobs", headers=headers)
            assert r.status_code == 200, r.text
    finally:
        server.stop()
        reset_settings_cache()
