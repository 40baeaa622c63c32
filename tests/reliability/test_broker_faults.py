"""Broker fault tests: the broker apart from the state, failed over (Redis Sentinel) or restarted (RabbitMQ)
in the middle of an ingestion. Real servers (``tests/brokers.py``), real Celery worker processes (the stack of
``graphfleet up``), the LLM simulator over HTTP; the state is a Redis of its own.

Each test ingests the same excerpt of the Christmas Carol twice: once undisturbed, once with the broker fault
while chunks are being extracted. The disturbed job must succeed with every chunk extracted, no failure, and
the very same graph and counts (documents, chunks, entities, relations, reports) as the undisturbed one:
nothing lost (a lost message is re-sent by the job watchdog, ``shared/pipeline/watchdog.py``) and nothing
written twice (a redelivered message's task is idempotent).

What each test catches (run with the fix taken out): the Sentinel test times out when the workers reach the
broker by the primary's own ``redis://`` address instead of through the sentinels (the job never ends after the
kill); the RabbitMQ test fails when the watchdog reads kombu's lists in the state Redis (as before the
broker-neutral probe): it sees no message during the outage and re-sends steps the broker still holds."""

from __future__ import annotations

import pytest

from graphfleet_cli.local_client import LocalClient
from shared.config import reset_settings_cache
from shared.infra.redis.conn import EmbeddedRedis
from shared.infra.redis.keys import Keys
from shared.infra.store.redis_graph import GraphStore
from tests.brokers import rabbit_vhost, sentinel_group
from tests.integration.helpers import graph_snapshot, start_stack
from tests.reliability.conftest import FAST_WATCHDOG, sim
from tests.reliability.conftest import excerpt as _excerpt
from tests.reliability.conftest import wait_for as _wait_for

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.own_servers]

VISIBILITY_S = 15


def _s(v) -> str:
    return v.decode() if isinstance(v, bytes) else v




@pytest.fixture()
def state(tmp_path):
    server = EmbeddedRedis(tmp_path / "state", persist=False).start()
    yield server
    server.stop()


def _use_broker(monkeypatch, state_url: str, broker_url: str) -> None:
    """This process (the stack's readiness check, the client that enqueues) talks to the same broker as the
    workers, which get it through ``GRAPHFLEET_BROKER_URL`` too."""
    monkeypatch.setenv("GRAPHFLEET_REDIS_URL", state_url)
    monkeypatch.setenv("GRAPHFLEET_BROKER_URL", broker_url)
    reset_settings_cache()


def _ingest_through_fault(tmp_path, state_url: str, broker_url: str, fault, *, resumes_allowed: bool) -> None:
    """``resumes_allowed``: whether the job watchdog may have had to re-send lost steps (a message on a Sentinel
    primary that had not reached its replica when it died); a broker that keeps its messages needs none."""
    doc = _excerpt(tmp_path, 30_000, 60_000)
    with sim(latency_ms=400) as llm:
        stack = start_stack(state_url, tmp_path / "stack", llm, concurrency=4, GRAPHFLEET_BROKER_URL=broker_url,
                            GRAPHFLEET_WORKERS__VISIBILITY_TIMEOUT_S=VISIBILITY_S, **FAST_WATCHDOG)
        client = LocalClient(state_url)
        try:
            steady = client.wait("steady", client.ingest_files("steady", [doc])["job_id"], timeout=600)
            assert steady["status"] == "succeeded", steady
            job_id = client.ingest_files("faulted", [doc])["job_id"]
            _wait_for(lambda: client.job("faulted", job_id)["progress"]["chunks_done"] >= 1, "extraction started")
            assert client.job("faulted", job_id)["status"] == "running"
            fault()
            view = client.wait("faulted", job_id, timeout=600)
        finally:
            stack.stop()
    assert view["status"] == "succeeded", view
    assert view["failures"] == []
    k = Keys("faulted")
    resumes = int(client.redis.hget(k.job(job_id), "resumes") or 0)
    assert resumes_allowed or resumes == 0, f"the watchdog had to re-send lost steps {resumes} time(s)"
    chunks = {_s(c) for c in client.redis.smembers(k.job_chunks(job_id))}
    assert chunks and all(client.redis.exists(k.extraction(c)) for c in chunks), "a chunk was never extracted"
    assert view["progress"]["chunks_done"] == view["progress"]["chunks_total"] == len(chunks)
    faulted, undisturbed = GraphStore(client.redis, "faulted"), GraphStore(client.redis, "steady")
    assert faulted.stats() == undisturbed.stats()  # one document, the same chunks, entities, relations, reports
    assert faulted.stats()["documents"] == 1
    assert graph_snapshot(faulted) == graph_snapshot(undisturbed)
    client.close()


def test_sentinel_primary_failover_mid_ingestion_loses_and_duplicates_nothing(tmp_path, state, monkeypatch):
    """The broker is a Sentinel group (``sentinel://``); its primary is SIGKILLed mid-extraction and the
    sentinels promote the replica. Workers and the enqueuing client reconnect to the new primary through the
    sentinels (kombu's sentinel transport; the lease renewal through kombu's own pool). Messages written to the
    old primary and not yet replicated are gone: the job watchdog sees the job stalled with nothing in the
    broker and re-sends the missing steps."""
    with sentinel_group(tmp_path) as group:
        _use_broker(monkeypatch, state.url, group.url)
        before = group.master_addr()
        _ingest_through_fault(tmp_path, state.url, group.url, lambda: group.failover(kill=True),
                              resumes_allowed=True)
        assert group.master_addr() != before


@pytest.mark.serial  # stops the machine's RabbitMQ: every vhost's connections break, other tests' too
def test_rabbitmq_restart_mid_job_loses_nothing(tmp_path, state, monkeypatch):
    """The broker is RabbitMQ (quorum queues, publisher confirms); it is stopped mid-extraction, for longer than
    the watchdog's stall window, and started again.
    Every connection breaks: the unacked messages go back to their (durable, quorum) queues, the workers
    reconnect and run them again; the job ends with the same graph as an undisturbed run, and the job watchdog
    never had to re-send a step (the broker lost no message)."""
    with rabbit_vhost() as vhost:
        _use_broker(monkeypatch, state.url, vhost.url)
        down_s = 3 * FAST_WATCHDOG["GRAPHFLEET_WORKERS__STALL_TIMEOUT_S"]  # longer than the watchdog's stall window
        _ingest_through_fault(tmp_path, state.url, vhost.url, lambda: vhost.restart(down_s=down_s),
                              resumes_allowed=False)
