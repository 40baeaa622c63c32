"""Consumer heartbeats end to end: a real Celery worker process publishes its queues (workers/heartbeat.py), the
scrape-time collector counts it in ``graphfleet_queue_consumers``; a clean shutdown removes it at once, a
killed worker ages out of the window."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from shared.infra.observability.metrics_collectors import QueueDepthCollector
from shared.infra.redis.conn import connect
from shared.infra.redis.keys import consumers_key
from tests.conftest import ROOT

pytestmark = pytest.mark.integration
DB = 11  # a database no other test's messages are on: this worker consumes nothing
QUEUES = ["chunker", "merger", "reporter"]


def consumers(redis, window_s: float = 30.0) -> dict[str, float]:
    reg = CollectorRegistry()
    reg.register(QueueDepthCollector(redis, QUEUES, window_s=window_s))
    out = {}
    for fam in text_string_to_metric_families(generate_latest(reg).decode()):
        if fam.name == "graphfleet_queue_consumers":
            out = {s.labels["queue"]: s.value for s in fam.samples}
    return out


def start_worker(url: str, tmp_path, broker: str = "") -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GRAPHFLEET_")}
    env.update({"GRAPHFLEET_REDIS_URL": url, "GRAPHFLEET_BROKER_URL": broker, "GRAPHFLEET_DATA_DIR": str(tmp_path),
                "PYTHONPATH": str(ROOT),
                "GRAPHFLEET_LLM_API_KEY": "sk-test", "GRAPHFLEET_WORKERS__HEARTBEAT_INTERVAL_S": "0.3"})
    cmd = [sys.executable, "-m", "celery", "-A", "workers.celery_app", "worker", "-Q", "chunker,merger", "-P",
           "threads", "-c", "1", "-n", "hbtest@%h", "-l", "WARNING", "--without-gossip", "--without-mingle",
           "--without-heartbeat"]
    log = open(tmp_path / "worker.log", "ab")  # noqa: SIM115 - owned by the child
    return subprocess.Popen(cmd, env=env, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)


def wait_for(predicate, proc: subprocess.Popen | None, tmp_path, timeout: float = 90.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"worker exited {proc.returncode}: {(tmp_path / 'worker.log').read_text()[-3000:]}")
        time.sleep(0.2)
    raise AssertionError(f"condition not reached; worker log: {(tmp_path / 'worker.log').read_text()[-3000:]}")


@pytest.fixture()
def redis_db(redis_server):
    url = redis_server.side_url(DB)
    client = connect(url)
    client.flushdb()
    yield url, client, redis_server.side_broker_url
    client.flushdb()
    client.close()


@pytest.mark.parametrize("stop", ["sigterm", "sigkill"])
def test_worker_heartbeat_counts_its_queues_until_it_is_gone(redis_db, tmp_path, stop):
    url, redis, broker = redis_db
    assert consumers(redis) == {"chunker": 0.0, "merger": 0.0, "reporter": 0.0}
    proc = start_worker(url, tmp_path, broker)
    try:
        wait_for(lambda: consumers(redis)["chunker"] == 1.0, proc, tmp_path)
        assert consumers(redis) == {"chunker": 1.0, "merger": 1.0, "reporter": 0.0}
        assert redis.zrange(consumers_key("chunker"), 0, -1) == [redis.zrange(consumers_key("merger"), 0, -1)[0]]
        if stop == "sigterm":  # warm shutdown: the worker removes itself
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=60)
            assert consumers(redis) == {"chunker": 0.0, "merger": 0.0, "reporter": 0.0}
        else:  # killed: its last heartbeat stays and ages out of the window
            proc.kill()
            proc.wait(timeout=30)
            assert redis.zcard(consumers_key("chunker")) == 1
            wait_for(lambda: consumers(redis, window_s=1.0) == {"chunker": 0.0, "merger": 0.0, "reporter": 0.0},
                     None, tmp_path, timeout=30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
