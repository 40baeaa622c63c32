"""Shared fixtures: a real Redis on a free port, the LLM simulator over HTTP, real Celery workers."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import pytest

from shared.config import reset_settings_cache
from shared.infra.redis_conn import EmbeddedRedis, connect

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "graphfleet_cli" / "sample" / "christmas_carol.txt"


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory):
    server = EmbeddedRedis(tmp_path_factory.mktemp("redis"), persist=False).start()
    yield server
    server.stop()


@pytest.fixture()
def redis_client(redis_server):
    client = connect(redis_server.url)
    yield client
    client.close()


@pytest.fixture()
def tenant() -> str:
    return "t" + uuid.uuid4().hex[:12]


@pytest.fixture(scope="session")
def simulator():
    from llm_simulator.config import SimConfig
    from llm_simulator.server import start_in_thread

    url, stop = start_in_thread(SimConfig(port=0, seed=7))
    yield url
    stop()


@pytest.fixture()
def settings_env(monkeypatch, redis_server, simulator, tmp_path):
    """Point this process's settings at the test Redis and the simulator."""
    monkeypatch.setenv("GRAPHFLEET_REDIS_URL", redis_server.url)
    monkeypatch.setenv("GRAPHFLEET_LLM_BASE_URL", simulator)
    monkeypatch.setenv("GRAPHFLEET_LLM_API_KEY", "sk-test")
    monkeypatch.setenv("GRAPHFLEET_DATA_DIR", str(tmp_path))
    reset_settings_cache()
    yield
    reset_settings_cache()


def worker_env(simulator_url: str | None, **extra) -> dict:
    env = {"GRAPHFLEET_LLM_API_KEY": "sk-test"}
    if simulator_url:
        env["GRAPHFLEET_LLM_BASE_URL"] = simulator_url
    else:
        env["GRAPHFLEET_LLM_BASE_URL"] = ""
    env.update({k: str(v) for k, v in extra.items()})
    return env


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch):
    for key in list(os.environ):
        if key.startswith("GRAPHFLEET_"):
            monkeypatch.delenv(key, raising=False)
    reset_settings_cache()
