"""Fixtures of the unit tests."""

from __future__ import annotations

import openai
import pytest

from llm_simulator.config import SimConfig
from llm_simulator.server import start_in_thread
from shared.infra.redis.conn import EmbeddedRedis


@pytest.fixture
def start():
    """``start(**SimConfig fields) -> (url, openai client)``: simulators on free ports, stopped after the test."""
    stops = []

    def _start(**kwargs):
        url, stop = start_in_thread(SimConfig(port=0, **kwargs))
        stops.append(stop)
        client = openai.OpenAI(base_url=url, api_key="sk-sim", max_retries=0, timeout=30)
        return url, client

    yield _start
    for stop in stops:
        stop()


@pytest.fixture()
def broker_redis(tmp_path):
    """A Redis of the test's own, without persistence, to be a broker (started and stopped with the test)."""
    server = EmbeddedRedis(tmp_path / "broker", persist=False).start()
    yield server
    server.stop()
