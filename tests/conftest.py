"""Shared fixtures: a real Redis on a free port, the LLM simulator over HTTP, real Celery workers.

The whole suite runs against the backends chosen by two variables, read once here (before the autouse
fixture below clears every ``GRAPHFLEET_*`` variable): ``GRAPHFLEET_TEST_STATE`` = ``single`` (one Redis
holds state and broker, the default) or ``cluster`` (state on a 3-master Redis Cluster with replicas, started
by the session), and ``GRAPHFLEET_TEST_BROKER`` = ``redis`` (a Redis of its own when the state is a cluster)
or ``rabbitmq`` (a vhost of the RabbitMQ server). ``scripts/test.sh`` runs the suite in the single layout, then
in the cluster layout only the tests the layout reaches: those using the session's backend (the ``redis_server``
fixture, directly or through another fixture), which the collection hook below marks ``backend``.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from pathlib import Path

import pytest

from shared.config import reset_settings_cache
from shared.infra.redis.conn import EmbeddedRedis, connect

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "graphfleet_cli" / "sample" / "christmas_carol.txt"


TEST_STATE = os.environ.get("GRAPHFLEET_TEST_STATE", "single")
TEST_BROKER = os.environ.get("GRAPHFLEET_TEST_BROKER", "redis")
_BROKER_ENV: dict[str, str] = {}  # GRAPHFLEET_BROKER_URL of the session's backend, set again for every test


def pytest_addoption(parser):
    parser.addoption("--only-backend", action="store_true",
                     help="run only the tests marked backend (they use the session's state Redis or broker, the "
                          "only things GRAPHFLEET_TEST_STATE/BROKER change), minus own_servers: scripts/test.sh's "
                          "second layout")
    parser.addoption("--serial", choices=("all", "without", "only"), default="all",
                     help="the tests marked serial (they disturb what other tests share): run with the others (all), "
                          "leave them out (without: scripts/test.sh's parallel run) or run only them (only)")


def pytest_collection_modifyitems(config, items):
    """Mark ``backend`` every test whose fixtures include ``redis_server`` (the session's state Redis and broker,
    chosen by the layout): a new test is classified by what it uses, with no marker to remember. With
    ``--only-backend`` the others are deselected: the layout changes nothing for them. ``--serial`` keeps or
    leaves out the tests marked ``serial``."""
    for item in items:
        if "redis_server" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.backend)
    only_backend, serial = config.getoption("--only-backend"), config.getoption("--serial")
    keep, dropped = [], []
    for item in items:
        runs = not only_backend or (item.get_closest_marker("backend") and not item.get_closest_marker("own_servers"))
        if serial != "all":
            runs = runs and (item.get_closest_marker("serial") is not None) == (serial == "only")
        (keep if runs else dropped).append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = keep


class Backend:
    """What the session's tests run against. ``url`` is the state Redis (``GRAPHFLEET_REDIS_URL``);
    ``broker_url`` Celery's broker when apart from it (else None); ``gateway_url`` / ``gateway_broker_url``
    the pair the in-process gateway tests flush freely (a database index of its own on a single Redis)."""

    def __init__(self, base: Path):
        self.base = base
        self.exits = contextlib.ExitStack()
        self.broker_url: str | None = None
        self.gateway_broker_url: str | None = None

    def start(self) -> Backend:
        if TEST_STATE == "cluster":
            from tests.clusters import RedisClusterServers

            self.url = self._enter(RedisClusterServers(self.base / "cluster").start()).url
            self.gateway_url = self._enter(RedisClusterServers(self.base / "gwcluster", replicas=0).start()).url
        else:
            server = self._enter(EmbeddedRedis(self.base / "redis", persist=False).start())
            self.url = server.url
            self.gateway_url = server.url.rsplit("/", 1)[0] + "/7"
        if TEST_BROKER == "rabbitmq":
            from tests.brokers import rabbit_vhost

            self.broker_url = self.exits.enter_context(rabbit_vhost()).url
            self.gateway_broker_url = self.exits.enter_context(rabbit_vhost()).url
        elif TEST_STATE == "cluster":
            broker = self._enter(EmbeddedRedis(self.base / "broker", persist=False).start())
            self.broker_url, self.gateway_broker_url = broker.url, broker.url.rsplit("/", 1)[0] + "/7"
        if self.broker_url:  # for session and module fixtures too (set again after each test's clean-up)
            _BROKER_ENV["GRAPHFLEET_BROKER_URL"] = os.environ["GRAPHFLEET_BROKER_URL"] = self.broker_url
        return self

    def side_url(self, db: int) -> str:
        """A state Redis apart from ``url`` for tests that flush it: database ``db`` of the single Redis, the
        gateway tests' cluster on a cluster (database 0 only)."""
        return self.gateway_url if TEST_STATE == "cluster" else self.url.rsplit("/", 1)[0] + f"/{db}"

    @property
    def side_broker_url(self) -> str:
        """The broker that goes with :meth:`side_url` ("" = the side Redis itself, on a single Redis)."""
        return self.gateway_broker_url or ""

    def _enter(self, server):
        self.exits.callback(server.stop)
        return server

    def stop(self) -> None:
        if _BROKER_ENV:
            os.environ.pop("GRAPHFLEET_BROKER_URL", None)
        _BROKER_ENV.clear()
        self.exits.close()


@pytest.fixture(scope="session", autouse=True)
def _stack_start_budget():
    """``Stack.start`` waits for its workers to consume (``wait_ready``, 60 s by default). With scripts/test.sh's
    several test processes each starting stacks on a loaded machine, importing a worker can take longer than
    that: the tests' stacks get 240 s to come up (how long they take is no test's subject)."""
    from graphfleet_cli.stack import Stack

    defaults = Stack.wait_ready.__defaults__
    Stack.wait_ready.__defaults__ = (240.0,)
    yield
    Stack.wait_ready.__defaults__ = defaults


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory):
    backend = Backend(tmp_path_factory.mktemp("backend"))
    try:
        yield backend.start()
    finally:
        backend.stop()


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
    # no recluster jobs in the background (``shared.pipeline.recluster``) unless a test asks for them
    # (test_document_lifecycle): they call the LLM outside the jobs a test waits for, and a tenant one module's
    # stack marked due on the shared Redis would get its job from the next module's stack
    # a query that meets an index rebuild is served the version before only after a minute: a query a test sends
    # after its ingestion reads that ingestion's writes however slow the machine (tests/unit/test_stale_reads.py
    # checks the stale reads themselves)
    env = {"GRAPHFLEET_LLM_API_KEY": "sk-test", "GRAPHFLEET_CLUSTER__RECLUSTER_QUIET_S": "0",
           "GRAPHFLEET_QUERY__STALE_INDEX_AFTER_S": "60"}
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
    for key, value in _BROKER_ENV.items():
        monkeypatch.setenv(key, value)
    reset_settings_cache()
