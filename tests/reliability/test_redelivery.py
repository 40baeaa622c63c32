"""Delivery guarantees with real worker processes: a chunk that keeps killing its worker ends as a
recorded failure (not an endless redelivery loop), and a fan-in barrier whose task fails ends the
job instead of leaving it running forever.

The LLM simulator is the only fake. A thin ASGI wrapper in front of it (test side, outside every
production code path) lets the test see when a chosen chunk's prompt is in flight, and refuse one
prompt type, so the test can SIGKILL exactly the worker process that is processing that chunk.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import threading
import time

import psutil
import pytest
import uvicorn

from graphfleet_cli.local_client import LocalClient
from graphfleet_cli.stack import Stack
from llm_simulator.config import SimConfig
from llm_simulator.server import create_app
from shared.config import reset_settings_cache
from shared.domain.prompts.summarize_descriptions import MARKER as SUMMARY_MARKER
from shared.infra.jobs.store import JobStore
from shared.infra.messaging import queueing as q
from shared.infra.messaging.queueing import time_limits
from shared.infra.store.redis_graph import GraphStore
from tests.conftest import SAMPLE, worker_env

pytestmark = pytest.mark.integration

POISON = "Zqxj-poison-marker-7741"
MAX_REDELIVERIES = 2
GROUPS = [
    ("ingest", ["chunker", "merger", "reporter", "indexer"], "threads"),
    ("extract", ["extractor"], "prefork"),  # one pool child: the process to kill is unambiguous
    ("cluster", ["clusterer"], "solo"),
]


class Gate:
    """ASGI wrapper around the simulator: holds chat requests containing ``hold`` until released
    (announcing each), answers chat requests containing ``delay[0]`` ``delay[1]`` seconds late (announcing
    each in ``delayed``), and answers 400 to chat requests containing ``refuse``."""

    def __init__(self, app):
        self.app = app
        self.hold: str | None = None
        self.refuse: str | None = None
        self.arrived = threading.Semaphore(0)
        self.released = False
        self.delay: tuple[str, float] | None = None
        self.delayed = threading.Semaphore(0)

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or not scope["path"].endswith("/chat/completions"):
            return await self.app(scope, receive, send)
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        text = body.decode("utf-8", "replace")
        if self.refuse and self.refuse in text:
            payload = json.dumps({"error": {"message": "refused by test", "type": "invalid_request_error"}})
            await send({"type": "http.response.start", "status": 400,
                        "headers": [(b"content-type", b"application/json")]})
            return await send({"type": "http.response.body", "body": payload.encode()})
        if self.hold and self.hold in text:
            self.arrived.release()
            while not self.released:
                await asyncio.sleep(0.05)
        if self.delay and self.delay[0] in text:
            self.delayed.release()
            await asyncio.sleep(self.delay[1])

        async def replay():
            return {"type": "http.request", "body": body, "more_body": False}

        return await self.app(scope, replay, send)


@pytest.fixture(scope="module")
def gate():
    g = Gate(create_app(SimConfig(port=0, seed=11)))
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(g, log_level="warning", access_log=False, lifespan="off"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.01)
    g.url = f"http://127.0.0.1:{sock.getsockname()[1]}/v1"
    yield g
    g.released = True
    server.should_exit = True
    thread.join(10)
    sock.close()


@pytest.fixture(scope="module")
def stack(redis_server, gate, tmp_path_factory):
    mp = pytest.MonkeyPatch()
    mp.setenv("GRAPHFLEET_WORKERS__LLM_CONCURRENCY", "4")  # the threads groups' size (read by Stack)
    mp.setenv("GRAPHFLEET_WORKERS__CPU_CONCURRENCY", "1")  # the extract group's one pool child
    reset_settings_cache()
    env = worker_env(gate.url, GRAPHFLEET_WORKERS__MAX_REDELIVERIES=MAX_REDELIVERIES,
                     GRAPHFLEET_CHUNKING__SIZE_TOKENS=300, GRAPHFLEET_CHUNKING__OVERLAP_TOKENS=20,
                     GRAPHFLEET_EXTRACTION__MAX_GLEANING=0, GRAPHFLEET_MERGE__FORCE_LLM_SUMMARY_ON_MERGE=2)
    s = Stack(data_dir=tmp_path_factory.mktemp("stack"), redis_url=redis_server.url, groups=GROUPS,
              extra_env=env).start()
    mp.undo()
    reset_settings_cache()
    yield s
    s.stop()


def _extract_child(stack) -> psutil.Process:
    proc = next(p for name, p in stack.procs if name == "extract")
    children = psutil.Process(proc.pid).children()
    assert len(children) == 1, children
    return children[0]


def _write_docs(tmp_path) -> tuple:
    story = SAMPLE.read_text(encoding="utf-8-sig")[40_000:46_000]
    normal, poison = tmp_path / "normal.txt", tmp_path / "poison.txt"
    normal.write_text(story, encoding="utf-8")
    poison.write_text(f"The ledger of Marley and {POISON} lay open on the desk in the counting-house.",
                      encoding="utf-8")
    return normal, poison


def test_chunk_that_kills_its_worker_ends_as_recorded_failure(stack, gate, tenant, tmp_path):
    client = LocalClient(stack.redis_url)
    gate.hold = POISON
    job_id = client.ingest_files(tenant, list(_write_docs(tmp_path)))["job_id"]
    kills = 0
    while kills < 1 + MAX_REDELIVERIES:  # the first delivery and every allowed redelivery die
        assert gate.arrived.acquire(timeout=300), f"poison chunk not delivered again after {kills} kills"
        child = _extract_child(stack)
        os.kill(child.pid, signal.SIGKILL)
        child.wait(30)
        kills += 1
    view = client.wait(tenant, job_id, timeout=600)
    assert not gate.arrived.acquire(timeout=0), "the LLM was called again after the redelivery limit"
    assert view["status"] == "succeeded", view
    docs = GraphStore(client.redis, tenant).documents(JobStore(client.redis, tenant).doc_ids(job_id))
    by_title = {d.title: d for d in docs.values()}
    assert [f["chunk_id"] for f in view["failures"]] == by_title["poison.txt"].chunk_ids
    failure = view["failures"][0]
    assert failure["stage"] == "extract" and "redelivery limit" in failure["cause"], failure
    assert by_title["poison.txt"].status == "failed"
    assert by_title["normal.txt"].status == "processed" and by_title["normal.txt"].error is None
    progress = view["progress"]
    assert progress["chunks_failed"] == 1
    assert progress["chunks_done"] == progress["chunks_total"] - 1 >= 3
    assert client.stats(tenant)["entities"] > 0


def test_failed_merge_barrier_ends_the_job_instead_of_hanging(stack, gate, tenant, tmp_path):
    client = LocalClient(stack.redis_url)
    gate.hold, gate.refuse = None, SUMMARY_MARKER  # every description summary is refused (HTTP 400)
    doc = tmp_path / "story.txt"
    doc.write_text(SAMPLE.read_text(encoding="utf-8-sig")[20_000:32_000], encoding="utf-8")
    try:
        view = client.wait(tenant, client.ingest_files(tenant, [doc])["job_id"], timeout=600)
    finally:
        gate.refuse = None
    assert view["status"] == "failed", view
    assert view["error"].startswith("merge_batch: ") and "http_400" in view["error"], view["error"]
    assert view["usage"]["by_stage"]["summarize"].get("prompt_tokens", 0) == 0  # every summary was refused
    # the failed job leaves no document ``processing``: it ends ``failed`` with the job's cause (``Job.fail``)
    docs = GraphStore(client.redis, tenant).documents(JobStore(client.redis, tenant).doc_ids(view["id"]))
    assert [(d.status, d.error) for d in docs.values()] == [("failed", view["error"])]


def test_time_limits_and_leases_fit_the_visibility_timeout(monkeypatch):
    """Soft < hard for every task; hard limits are no longer capped by the visibility timeout (a live
    worker renews its leases, tests/reliability/test_lease.py), and a lease is renewed at least four times
    per visibility timeout; a SIGTERM's soft shutdown ends well within the visibility timeout."""
    monkeypatch.delenv("GRAPHFLEET_BROKER_URL", raising=False)  # a Redis broker's transport options
    from shared.config import Settings
    from shared.infra.messaging.queueing import celery_config, lease_renew_interval

    for visibility in (15, 120, 3600):
        settings = Settings(workers={"visibility_timeout_s": visibility, "task_time_limit_s": 1200})
        config = celery_config(settings)
        assert config["broker_transport_options"]["visibility_timeout"] == visibility
        assert config["broker_transport_options"]["unacked_restore_throttle"] == 1
        limits = time_limits(settings)
        assert set(limits) == set(config["task_annotations"])
        assert all(0 < soft < hard for soft, hard in limits.values()), limits
        assert limits[q.EXTRACT] == (900, 1200)
        assert 0 < lease_renew_interval(settings) <= visibility / 4
        assert config["task_acks_late"] and config["task_reject_on_worker_lost"]
        assert config["worker_prefetch_multiplier"] == 1
    defaults = Settings().workers
    assert defaults.visibility_timeout_s == 120 and celery_config(Settings())["worker_soft_shutdown_timeout"] == 30
    assert defaults.soft_shutdown_timeout_s < defaults.visibility_timeout_s
