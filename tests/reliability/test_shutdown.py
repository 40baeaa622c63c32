"""Time limits that work under the pools the deployment uses, and a SIGTERM that requeues at once.

Real Redis, real worker processes (the embedded stack and its supervisor), the LLM simulator behind the
holding gate of ``test_redelivery`` (a test-side ASGI wrapper that holds chosen prompts), so a task is
reliably mid-flight when the test acts.
"""

from __future__ import annotations

import contextlib
import os
import signal
from pathlib import Path

import pytest
import yaml

from graphfleet_cli.local_client import LocalClient
from graphfleet_cli.stack import Stack
from shared.domain.prompts.summarize_descriptions import MARKER as SUMMARY_MARKER
from shared.infra.jobs.store import JobStore
from shared.infra.messaging import queueing as q
from shared.infra.redis.keys import Keys
from shared.infra.store.redis_graph import GraphStore
from tests.brokers import rabbit_vhost
from tests.conftest import SAMPLE, worker_env
from tests.reliability.test_redelivery import Gate, gate  # noqa: F401 - the module-scoped gate fixture

pytestmark = pytest.mark.integration

COMPOSE = Path(__file__).resolve().parents[2] / "docker-compose.yml"
MARKER = "Qwvx-held-marker-5519"
SLOW = "Zqfr-slow-marker-7731"
# the SIGTERM tests' worker groups: the one that is stopped runs every ingest queue on threads
SIGTERM_GROUPS = [("ingest", ["chunker", "extractor", "merger", "reporter", "indexer"], "threads"),
                  ("cluster", ["clusterer"], "prefork")]
TEXTS = {"held.txt": f"The ledger of Marley and {MARKER} lay open on the desk.",
         "slow.txt": f"Bob Cratchit and {SLOW} counted the coal in the tank."}


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

def _documents(tmp_path, *names: str) -> list[Path]:
    """The named ``TEXTS`` written as files (``held`` waits at the gate, ``slow`` is answered late); any other
    name is an excerpt of the sample story."""
    for name in names:
        text = TEXTS.get(name) or SAMPLE.read_text(encoding="utf-8-sig")[40_000:44_000]
        (tmp_path / name).write_text(text, encoding="utf-8")
    return [tmp_path / name for name in names]


def _drain(semaphore) -> None:
    """Forget the announcements left by an earlier test."""
    while semaphore.acquire(timeout=0):
        pass


def _deliveries(client: LocalClient, tenant: str, job_id: str) -> tuple[dict[str, int], dict[str, str]]:
    """(task:item -> times admitted, document title -> its first chunk id)."""
    deliveries = {k.decode(): int(v) for k, v in client.redis.hgetall(Keys(tenant).deliveries(job_id)).items()}
    docs = GraphStore(client.redis, tenant).documents(JobStore(client.redis, tenant).doc_ids(job_id))
    return deliveries, {d.title: d.chunk_ids[0] for d in docs.values()}


def _what_the_workers_said(stack: Stack) -> str:
    """The lines of every worker log that say what a shutdown, an ack, a requeue or the watchdog did (shown whole
    when a task ran twice: pytest cuts a message that is not a string)."""
    words = ("shutdown", "ack", "requeue", "stalled", "re-enqueued", "unreachable", "error")
    return "\n".join(f"{path.name}: {line}" for path in sorted(stack.log_dir.glob("*.log"))
                     for line in path.read_text().splitlines() if any(w in line.lower() for w in words))


def test_sigterm_mid_task_requeues_it_at_once_and_the_job_succeeds(gate: Gate, tmp_path):  # noqa: F811
    """SIGTERM (docker stop, a rolling restart) with a task running: Celery's soft shutdown gives it
    ``workers.soft_shutdown_timeout_s`` (30 s) and then requeues it; the supervisor's fresh worker runs it
    again and the job succeeds. Without the soft shutdown (a plain warm shutdown) the worker waits for the
    held task forever and the chunk is never delivered again (the 60 s wait below fails); with SIGKILL after
    a grace period it would wait for the visibility timeout.

    A task that finishes during the soft shutdown (an extraction whose LLM answer comes 3 s late) is acked and
    never runs again. Celery runs acks on its event loop, which its soft shutdown blocks: that extraction used
    to run a second time on the fresh worker, and a document chunked just before the signal was chunked again
    and sent its extraction twice (shared/infra/messaging/celery_patches/soft_shutdown.py)."""
    stack = _stack(tmp_path, gate.url, SIGTERM_GROUPS)
    _drain(gate.arrived)
    _drain(gate.delayed)
    gate.hold, gate.released, gate.delay = MARKER, False, (SLOW, 3.0)
    try:
        client = LocalClient(stack.redis_url, stack.broker_url)
        job_id = client.ingest_files("sigterm", _documents(tmp_path, "held.txt", "slow.txt", "normal.txt"))["job_id"]
        assert gate.arrived.acquire(timeout=120), "the held chunk never reached the LLM"
        assert gate.delayed.acquire(timeout=120), "the slow chunk never reached the LLM"
        worker = dict(stack.procs)["ingest"]
        os.kill(worker.pid, signal.SIGTERM)
        worker.wait(timeout=120)  # the soft shutdown, then the requeue
        assert gate.arrived.acquire(timeout=60), "the interrupted task was not delivered again within a minute"
        assert dict(stack.procs)["ingest"] is not worker  # it ran on the supervisor's fresh worker
        gate.hold = None
        gate.released = True
        view = client.wait("sigterm", job_id, timeout=300)
        deliveries, chunk = _deliveries(client, "sigterm", job_id)
    finally:
        gate.hold, gate.released, gate.delay = None, True, None
        stack.stop()
    assert view["status"] == "succeeded", view
    assert view["failures"] == []
    interrupted = f"{q.EXTRACT}:{chunk['held.txt']}"
    assert deliveries[interrupted] == 2, deliveries  # interrupted, requeued, run again
    assert deliveries[f"{q.EXTRACT}:{chunk['slow.txt']}"] == 1, deliveries  # finished in the soft shutdown
    # everything else finished before the signal or during the soft shutdown, and was acked: run once
    assert {k: v for k, v in deliveries.items() if k != interrupted and v != 1} == {}, deliveries


@pytest.mark.parametrize("broker", ["redis", pytest.param("rabbitmq", marks=pytest.mark.own_servers)])
def test_sigterm_waits_only_for_the_running_tasks_and_runs_nothing_twice(gate: Gate, tmp_path, broker):  # noqa: F811
    """With nothing held, the soft shutdown ends once the running task finished and was acked, not at its
    timeout (600 s here: Celery slept it out; the 120 s wait for the exit below would fail), and the job
    goes on on the supervisor's fresh worker with every task run once. On the embedded Redis broker and on
    RabbitMQ (where the acks go out on the AMQP connection before the worker closes it)."""
    with contextlib.ExitStack() as servers:
        env = {} if broker == "redis" else {"GRAPHFLEET_BROKER_URL": servers.enter_context(rabbit_vhost()).url}
        _sigterm_with_one_slow_task(gate, tmp_path, env)


def _sigterm_with_one_slow_task(gate: Gate, tmp_path, env: dict) -> None:  # noqa: F811
    stack = _stack(tmp_path, gate.url, SIGTERM_GROUPS, GRAPHFLEET_WORKERS__SOFT_SHUTDOWN_TIMEOUT_S=600, **env)
    _drain(gate.delayed)
    gate.delay = (SLOW, 3.0)
    try:
        client = LocalClient(stack.redis_url, stack.broker_url)
        job_id = client.ingest_files("drain", _documents(tmp_path, "slow.txt", "normal.txt"))["job_id"]
        assert gate.delayed.acquire(timeout=120), "the slow chunk never reached the LLM"
        worker = dict(stack.procs)["ingest"]
        os.kill(worker.pid, signal.SIGTERM)
        worker.wait(timeout=120)
        view = client.wait("drain", job_id, timeout=300)
        deliveries, _chunk = _deliveries(client, "drain", job_id)
    finally:
        gate.delay = None
        stack.stop()
    log = (stack.log_dir / "worker-ingest.log").read_text()
    assert view["status"] == "succeeded", view
    twice = {k: v for k, v in deliveries.items() if v != 1}
    assert twice == {}, f"run more than once: {twice}\n{_what_the_workers_said(stack)}"
    assert "every running task finished and was acked" in log
    # nothing started after the wait: a task started then cannot be stopped on -P threads (Celery's cancel
    # raised NotImplementedError: "Unrecoverable error"; in one CI run the worker was alive 120 s after SIGTERM)
    assert "Unrecoverable error" not in log and "NotImplementedError" not in log, log[-3000:]
