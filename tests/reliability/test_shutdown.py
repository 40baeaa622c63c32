"""Time limits that work under the pools the deployment uses, and a SIGTERM that requeues at once.

Real Redis, real worker processes (the embedded stack and its supervisor), the LLM simulator behind the
holding gate of ``test_redelivery`` (a test-side ASGI wrapper that holds chosen prompts), so a task is
reliably mid-flight when the test acts.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest
import yaml

from graphfleet_cli.local_client import LocalClient
from graphfleet_cli.stack import Stack
from shared.domain.prompts.summarize_descriptions import MARKER as SUMMARY_MARKER
from shared.infra import queueing as q
from shared.infra.jobs import JobStore
from shared.infra.keys import Keys
from shared.infra.store.redis_graph import GraphStore
from tests.conftest import SAMPLE, worker_env
from tests.reliability.test_redelivery import Gate, gate  # noqa: F401 - the module-scoped gate fixture

pytestmark = pytest.mark.integration

COMPOSE = Path(__file__).resolve().parents[2] / "docker-compose.yml"
MARKER = "Qwvx-held-marker-5519"


def compose_pool(queue: str) -> str:
    """The ``-P`` pool of the compose service that consumes ``queue``."""
    services = yaml.safe_load(COMPOSE.read_text())["services"]
    for svc in services.values():
        cmd = [str(c) for c in svc.get("command") or []]
        if cmd[:4] == ["celery", "-A", "workers.celery_app", "worker"] and queue in cmd[cmd.index("-Q") + 1].split(","):
            return cmd[cmd.index("-P") + 1]
    raise AssertionError(f"no compose worker consumes {queue}")


def _stack(tmp_path, gate_url: str, groups, **env) -> Stack:
    return Stack(data_dir=tmp_path / "stack", redis_url=None, worker_concurrency=4, groups=groups,
                 extra_env=worker_env(gate_url, GRAPHFLEET_EXTRACTION__MAX_GLEANING=0, **env)).start()


def test_merge_over_its_time_limit_is_stopped_and_fails_the_job(gate: Gate, tmp_path):  # noqa: F811
    """Under the pool compose runs the merger on, a merge batch held past its time limit is stopped and the
    job ends ``failed`` with the cause. On ``-P threads`` (compose before) Celery enforces no limit: the task
    waits at the gate forever and ``client.wait`` raises TimeoutError."""
    pool = compose_pool("merger")
    assert compose_pool("clusterer") == pool == "prefork"
    groups = [("ingest", ["chunker", "extractor", "reporter", "indexer"], "threads"), ("merge", ["merger"], pool),
              ("cluster", ["clusterer"], compose_pool("clusterer"))]
    stack = _stack(tmp_path, gate.url, groups, GRAPHFLEET_WORKERS__TASK_SOFT_TIME_LIMIT_S=3,
                   GRAPHFLEET_WORKERS__TASK_TIME_LIMIT_S=6, GRAPHFLEET_MERGE__FORCE_LLM_SUMMARY_ON_MERGE=2)
    gate.hold, gate.refuse = SUMMARY_MARKER, None  # every description summary hangs at the "LLM"
    try:
        client = LocalClient(stack.redis_url)
        doc = tmp_path / "story.txt"
        doc.write_text(SAMPLE.read_text(encoding="utf-8-sig")[20_000:32_000], encoding="utf-8")
        view = client.wait("limits", client.ingest_files("limits", [doc])["job_id"], timeout=300)
    finally:
        gate.hold = None
        stack.stop()
    assert gate.arrived.acquire(timeout=0), "no summary was held: the test exercised nothing"
    assert view["status"] == "failed", view
    assert view["error"].startswith("merge_batch: ") and "TimeLimitExceeded" in view["error"], view["error"]


def test_sigterm_mid_task_requeues_it_at_once_and_the_job_succeeds(gate: Gate, tmp_path):  # noqa: F811
    """SIGTERM (docker stop, a rolling restart) with a task running: Celery's soft shutdown gives it
    ``workers.soft_shutdown_timeout_s`` (30 s) and then requeues it; the supervisor's fresh worker runs it
    again and the job succeeds. Without the soft shutdown (a plain warm shutdown) the worker waits for the
    held task forever and the chunk is never delivered again (the 60 s wait below fails); with SIGKILL after
    a grace period it would wait for the visibility timeout."""
    groups = [("ingest", ["chunker", "extractor", "merger", "reporter", "indexer"], "threads"),
              ("cluster", ["clusterer"], "prefork")]
    stack = _stack(tmp_path, gate.url, groups)
    while gate.arrived.acquire(timeout=0):  # arrivals of the previous test
        pass
    gate.hold, gate.released = MARKER, False
    try:
        client = LocalClient(stack.redis_url)
        held, normal = tmp_path / "held.txt", tmp_path / "normal.txt"
        held.write_text(f"The ledger of Marley and {MARKER} lay open on the desk.", encoding="utf-8")
        normal.write_text(SAMPLE.read_text(encoding="utf-8-sig")[40_000:44_000], encoding="utf-8")
        job_id = client.ingest_files("sigterm", [held, normal])["job_id"]
        assert gate.arrived.acquire(timeout=120), "the held chunk never reached the LLM"
        worker = dict(stack.procs)["ingest"]
        os.kill(worker.pid, signal.SIGTERM)
        worker.wait(timeout=120)  # the soft shutdown, then the requeue
        assert gate.arrived.acquire(timeout=60), "the interrupted task was not delivered again within a minute"
        assert dict(stack.procs)["ingest"] is not worker  # it ran on the supervisor's fresh worker
        gate.hold = None
        gate.released = True
        view = client.wait("sigterm", job_id, timeout=300)
        deliveries = {k.decode(): int(v) for k, v in client.redis.hgetall(Keys("sigterm").deliveries(job_id)).items()}
        docs = GraphStore(client.redis, "sigterm").documents(JobStore(client.redis, "sigterm").doc_ids(job_id))
        held_chunk = next(d for d in docs.values() if d.title == "held.txt").chunk_ids[0]
    finally:
        gate.hold, gate.released = None, True
        stack.stop()
    assert view["status"] == "succeeded", view
    assert view["failures"] == []
    assert deliveries[f"{q.EXTRACT}:{held_chunk}"] == 2, deliveries  # interrupted, requeued, run again
    # messages the worker had reserved but not started are requeued with it: delivered twice, never more
    assert set(deliveries.values()) <= {1, 2}, deliveries
