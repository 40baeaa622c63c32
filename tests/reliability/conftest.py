"""Reliability fixtures: simulators with latency or faults, a private Redis, the in-process gateway."""

from __future__ import annotations

import contextlib
import time

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
    from shared.infra.redis.conn import EmbeddedRedis

    server = EmbeddedRedis(tmp_path / "redis", persist=False).start()
    yield server
    server.stop()


# the job watchdog sweeps every second and resumes a job idle for 5 s with none of its messages anywhere
FAST_WATCHDOG = {"GRAPHFLEET_WORKERS__WATCHDOG_INTERVAL_S": 1, "GRAPHFLEET_WORKERS__STALL_TIMEOUT_S": 5}


def wait_for(predicate, what: str, timeout: float = 300.0, every: float = 0.05):
    """``predicate()``'s first true value, polled every ``every`` s; AssertionError after ``timeout`` s."""
    deadline = time.time() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.time() > deadline:
            raise AssertionError(f"gave up waiting for {what}")
        time.sleep(every)


def excerpt(tmp_path, start: int, end: int):
    """Characters ``start:end`` of the Christmas Carol sample, as a file."""
    from tests.conftest import SAMPLE

    path = tmp_path / "excerpt.txt"
    path.write_text(SAMPLE.read_text(encoding="utf-8-sig")[start:end], encoding="utf-8")
    return path


def sample_parts(tmp_path, count: int, chars: int | None = None) -> list:
    """The first ``chars`` characters of the Christmas Carol sample (all of it by default) cut into ``count``
    files of equal length: a batch of several documents."""
    from tests.conftest import SAMPLE

    text = SAMPLE.read_text(encoding="utf-8-sig")[:chars]
    size = len(text) // count
    paths = []
    for i in range(count):
        path = tmp_path / f"part{i:02d}.txt"
        path.write_text(text[i * size:(i + 1) * size], encoding="utf-8")
        paths.append(path)
    return paths


def graph_and_stats(client, tenant: str) -> dict:
    """Everything that defines a tenant's graph (``graph_snapshot``) and its counts."""
    from shared.infra.store.redis_graph import GraphStore
    from tests.integration.helpers import graph_snapshot

    store = GraphStore(client.redis, tenant)
    return {**graph_snapshot(store), **store.stats()}
