"""A SIGKILLed worker costs seconds, not an hour, under the embedded stack with DEFAULT settings.

`graphfleet up` used to stop the whole stack when one worker exited, and the killed worker's deliveries
waited in kombu's ``unacked`` hash for a one-hour visibility timeout (the job watchdog rightly leaves a job
alone while any of its messages is there). Now the stack's supervisor restarts the worker group and, two
lease intervals after the exit, puts back the messages no live worker renewed since
(``celery_patches.redis_leases.reclaim_unrenewed``), unless the restarted workers' lease threads got there first
(``workers/lease.py``: a lease two intervals + 2 s old is put back by any live worker; which one wins varies),
so the job completes by itself.
Real Redis, real worker processes and gateway, the LLM simulator over HTTP.
"""

from __future__ import annotations

import os
import signal
import socket
import time

import httpx
import pytest

from graphfleet_cli.local_client import LocalClient
from graphfleet_cli.stack import Stack, consumed_queues
from shared.config import get_settings
from shared.infra.messaging.queueing import make_celery, settings_for
from shared.infra.redis.conn import EmbeddedRedis
from shared.infra.redis.keys import BROKER_UNACKED, BROKER_UNACKED_INDEX
from tests.conftest import worker_env
from tests.reliability.conftest import graph_and_stats, sample_parts, sim

pytestmark = [pytest.mark.integration, pytest.mark.slow]

RECOVERY_S = 180  # the bound: the job completes within 3 minutes of the kill, with no manual step


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_for(predicate, what: str, timeout: float, every: float = 0.05):
    deadline = time.time() + timeout
    while not (value := predicate()):
        if time.time() > deadline:
            raise AssertionError(f"gave up waiting for {what}")
        time.sleep(every)
    return value


def test_sigkilled_worker_is_restarted_and_its_job_completes_with_default_settings(private_redis, tmp_path):
    """Without the supervisor the ingest queues have no consumer after the kill (the job never ends);
    with the former defaults (3600 s visibility, no lease renewal) the killed worker's messages stay in
    ``unacked`` for an hour: ``client.wait`` raises TimeoutError after ``RECOVERY_S`` either way."""
    docs = sample_parts(tmp_path, 12)
    with sim(latency_ms=100) as llm:
        stack = Stack(data_dir=tmp_path / "stack", redis_url=private_redis.url, worker_concurrency=4,
                      gateway_port=_free_port(), extra_env=worker_env(llm)).start()
        try:
            client = LocalClient(private_redis.url)
            clean = client.wait("clean", client.ingest_files("clean", docs)["job_id"], timeout=900)
            assert clean["status"] == "succeeded", clean["failures"]
            expected = graph_and_stats(client, "clean")

            job_id = client.ingest_files("killed", docs)["job_id"]

            def mid_extraction():
                p = client.job("killed", job_id)["progress"]
                return p["chunks_total"] and p["chunks_total"] // 4 <= p["chunks_done"] <= p["chunks_total"] // 2

            _wait_for(mid_extraction, "extraction in flight", timeout=600)
            before = dict(stack.procs)
            os.kill(before["ingest"].pid, signal.SIGKILL)  # the worker process, as `kill -9 <pid>` does
            killed_at = time.time()
            before["ingest"].wait()
            assert client.redis.hlen(BROKER_UNACKED) > 0, "the killed worker held no message: nothing to recover"
            orphaned = {t for t, _s in client.redis.zrange(BROKER_UNACKED_INDEX, 0, -1, withscores=True)}

            view = client.wait("killed", job_id, timeout=RECOVERY_S)  # no manual step
            recovered_in = time.time() - killed_at

            assert view["status"] == "succeeded", view["failures"]
            assert view["failures"] == []
            got = graph_and_stats(client, "killed")
            for key in ("documents", "chunks", "entities", "relations", "communities_by_level", "reports",
                        "communities"):
                assert got[key] == expected[key], key
            assert got["entities"] == expected["entities"]  # descriptions and source ids: no chunk counted twice
            assert got["relations"] == expected["relations"]  # weights would double on a duplicate
            now = dict(stack.procs)
            assert now["ingest"].pid != before["ingest"].pid and now["ingest"].poll() is None
            for name, proc in before.items():  # the gateway and every other worker kept serving
                if name != "ingest":
                    assert now[name] is proc and proc.poll() is None, name
            assert httpx.get(stack.gateway_url + "/healthz", timeout=5).status_code == 200
            assert stack.failure is None and stack.supervisor.restarts == 1
            assert not orphaned & set(client.redis.hkeys(BROKER_UNACKED)), "orphaned messages never restored"
            print(f"recovered {recovered_in:.0f} s after the kill")
        finally:
            stack.stop()


def test_supervisor_backs_off_and_gives_up_after_repeated_crashes(private_redis, tmp_path):
    """A worker group that crashes on every start is restarted after 1, 2, 4, 8 s and given up at its fifth
    exit, loudly (``Stack.failure``, which stops ``graphfleet up``); the other group keeps running."""
    groups = [("cluster", ["clusterer"], "solo"), ("query", ["query", "reducer"], "threads")]
    stack = Stack(data_dir=tmp_path / "stack", redis_url=private_redis.url, worker_concurrency=2, groups=groups,
                  extra_env=worker_env(None)).start()
    try:
        lines: list[str] = []
        stack.supervisor.say = lines.append
        query = dict(stack.procs)["query"]
        stack.specs["cluster"] = (["clusterer"], "no-such-pool")  # from now on the group dies at start
        os.kill(dict(stack.procs)["cluster"].pid, signal.SIGKILL)
        _wait_for(lambda: stack.failure, "the supervisor giving up", timeout=120, every=0.2)
        assert "cluster exited 5 times within 300 s" in stack.failure and "giving up" in stack.failure
        assert [line.split("restarting in ")[1].split(" ")[0] for line in lines if "restarting in" in line] == \
            ["1", "2", "4", "8"]
        assert stack.supervisor.restarts == 4 and lines[-1].endswith(stack.failure.split("; ")[-1])
        assert dict(stack.procs)["query"] is query and query.poll() is None
    finally:
        stack.stop()


def test_a_stack_starts_on_a_redis_restarted_at_the_same_address(tmp_path):
    """kombu pools broker connections per broker URL for the whole process. A stack started after its Redis came
    back on the same address (here, as in a test run, a new server on a reused port) finds a pooled connection to
    the old server: its readiness check rides out that one closed socket instead of failing the start."""
    first = EmbeddedRedis(tmp_path / "first", persist=False).start()
    try:
        assert consumed_queues(make_celery(settings_for(get_settings(), first.url, None))) == set()  # no worker
    finally:
        first.stop()
    second = EmbeddedRedis(tmp_path / "second", port=first.port, persist=False).start()
    try:
        stack = Stack(data_dir=tmp_path / "stack", redis_url=second.url, worker_concurrency=2,
                      groups=[("query", ["query", "reducer"], "threads")], extra_env=worker_env(None)).start()
        try:
            assert {"query", "reducer"} <= consumed_queues(stack.celery())
        finally:
            stack.stop()
    finally:
        second.stop()
