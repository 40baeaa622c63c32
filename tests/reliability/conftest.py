"""Reliability fixtures: simulators with latency or faults, a private Redis, the in-process gateway."""

from __future__ import annotations

import contextlib

import httpx
import pytest

# the in-process gateway fixtures (``api``, ``alice``, ``bob``) of tests/gateway, reused here
from tests.gateway.conftest import alice, api, bob, gw_env, gw_redis  # noqa: F401


@contextlib.contextmanager
def sim(**config):
    """An LLM simulator in this process (``llm_simulator.server.start_in_thread``); yields its /v1 URL."""
    from llm_simulator.config import SimConfig
    from llm_simulator.server import start_in_thread

    url, stop = start_in_thread(SimConfig(port=0, seed=config.pop("seed", 7), **config))
    try:
        yield url
    finally:
        stop()


def sim_stats(url: str) -> dict:
    return httpx.get(url.removesuffix("/v1") + "/stats", timeout=10).json()


@pytest.fixture()
def private_redis(tmp_path):
    """A Redis of this test alone: no other stack's workers consume its queues."""
    from shared.infra.redis_conn import EmbeddedRedis

    server = EmbeddedRedis(tmp_path / "redis", persist=False).start()
    yield server
    server.stop()
