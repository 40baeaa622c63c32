"""An LLM endpoint that goes away mid-ingestion: the job waits for it (``llm.outage_wait_s``) and resumes, or fails
with the cause once the wait is over, every document ending in a terminal state.

Real Redis, real Celery worker processes, the LLM simulator over HTTP, really stopped and started again on the
same port. The client gives up a call quickly here (one retry, short backoff) so that the steps meet the outage
as they would after their six retries against a provider down for minutes.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from api_gateway.routes.jobs import job_out
from graphfleet_cli.local_client import LocalClient
from llm_simulator.config import SimConfig
from llm_simulator.server import start_in_thread
from shared.infra.jobs.store import JobStore
from shared.infra.redis.conn import EmbeddedRedis
from shared.infra.store.redis_graph import GraphStore
from tests.integration.helpers import graph_snapshot, start_stack
from tests.reliability.conftest import FAST_WATCHDOG, excerpt, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.own_servers]  # its own Redis: the layout changes nothing
ROOT = Path(__file__).resolve().parents[2]
# the job's total wait for the LLM in these tests: long enough for `graphfleet jobs show` to start and see the wait
# on a loaded machine
BOUND_S = 45
FAST_GIVE_UP = {"GRAPHFLEET_LLM__MAX_RETRIES": 1, "GRAPHFLEET_LLM__BACKOFF_BASE_S": 0.05,
                "GRAPHFLEET_LLM__BACKOFF_MAX_S": 0.1, "GRAPHFLEET_LLM__TIMEOUT_S": 10,
                "GRAPHFLEET_LLM__OUTAGE_WAIT_S": BOUND_S, "GRAPHFLEET_LLM__OUTAGE_RECHECK_S": 0.5}


class Simulator:
    """The LLM simulator on one port, stopped and started again at will."""

    def __init__(self, **config):
        self.config = {"seed": 7, **config}
        self.url, self._stop = start_in_thread(SimConfig(port=0, **self.config))
        self.port = int(self.url.rsplit(":", 1)[1].split("/")[0])

    def stop(self) -> None:
        """Stop serving and return only once the server thread is gone (its connections closed with it) and the
        port refuses connections: a stop still under way would let the job's next LLM calls through."""
        if self._stop is not None:
            self._stop()
            self._stop = None
        for thread in [t for t in threading.enumerate() if t.name == f"llm-simulator-{self.port}"]:
            thread.join(60)
            assert not thread.is_alive(), "the simulator's server thread did not stop"
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
            except OSError:
                return
            time.sleep(0.1)
        raise AssertionError(f"the simulator's port {self.port} still accepts connections")

    def start(self) -> None:
        if self._stop is None:
            url, self._stop = start_in_thread(SimConfig(port=self.port, **self.config))
            assert url == self.url


@pytest.fixture(scope="module")
def outage_stack(tmp_path_factory):
    """(client, simulator, document): one stack whose workers talk to a simulator the tests stop and restart."""
    root = tmp_path_factory.mktemp("outage")
    server = EmbeddedRedis(root / "redis", persist=False).start()
    # each LLM call takes long enough that the outage begins while the job still has LLM work ahead of it, on a
    # busy machine too (its steps after extraction: gleaning, reports, the embeddings)
    llm = Simulator(latency_ms=400)
    stack = start_stack(server.url, root / "stack", llm.url, concurrency=4, **FAST_GIVE_UP, **FAST_WATCHDOG)
    try:
        yield LocalClient(server.url), llm, excerpt(root, 0, 12_000), server.url
    finally:
        stack.stop()
        llm.stop()
        server.stop()


def _jobs_show(redis_url: str, tenant: str, job_id: str) -> dict:
    """``graphfleet jobs show JOB --tenant T --json`` on the stack's Redis."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GRAPHFLEET_")}
    env["GRAPHFLEET_REDIS_URL"] = redis_url
    run = subprocess.run([sys.executable, "-m", "graphfleet_cli.main", "jobs", "show", job_id, "--tenant", tenant,
                          "--json"], env=env, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout)


def _waiting(client: LocalClient, tenant: str, job_id: str) -> dict:
    """The job's view once it shows it waits for the LLM."""
    return wait_for(lambda: (v := client.job(tenant, job_id)) and v.get("waiting") and v, "waiting for the LLM",
                    timeout=120)


def _mid_extraction(client: LocalClient, tenant: str, doc) -> str:
    job_id = client.ingest_files(tenant, [doc])["job_id"]
    # the outage begins as soon as the document is chunked: extraction (each call 400 ms) is then under way or next,
    # and the job's LLM steps are all ahead of it (waiting for a chunk to finish let a warm job reach its last
    # reports before the stop)
    wait_for(lambda: client.job(tenant, job_id)["progress"]["chunks_total"] >= 1, "extraction started", timeout=120)
    return job_id


def _reports(client: LocalClient, tenant: str) -> list[tuple[str, str, str]]:
    return sorted((r.generated_by, r.title, r.summary) for r in GraphStore(client.redis, tenant).reports().values())


def test_an_llm_outage_shorter_than_the_bound_waits_and_ends_with_the_undisturbed_graph(outage_stack):
    """Guarantee: with the simulator stopped mid-extraction (connection refused through every retry), the job
    does not fail its chunks: it shows "waiting for the LLM" (in the job view, ``GET /v1/jobs/{id}``'s body and
    ``graphfleet jobs show``), the watchdog leaves it alone (the outage outlasts its stall timeout), and once the
    simulator is back on the same port the job succeeds with no failure and the same graph and reports as an
    undisturbed run. Checked: without the wait (``workers.llm_wait``) the chunks fail with
    ``llm:connection: ...`` and the job never shows it waits."""
    client, llm, doc, redis_url = outage_stack
    steady = client.wait("steady", client.ingest_files("steady", [doc])["job_id"], timeout=300)
    assert steady["status"] == "succeeded" and steady["failures"] == [], steady
    job_id = _mid_extraction(client, "outage", doc)
    llm.stop()
    try:
        view = _waiting(client, "outage", job_id)
        waiting = view["waiting"]
        assert waiting["message"] == "waiting for the LLM", waiting
        assert waiting["gives_up_at"] == pytest.approx(waiting["since"] + BOUND_S)
        assert waiting["last_error"].startswith("connection"), waiting
        assert job_out(view).model_dump()["waiting"] == waiting  # GET /v1/jobs/{id}
        assert _jobs_show(redis_url, "outage", job_id)["waiting"]["message"] == "waiting for the LLM"
        # longer than the watchdog's stall timeout (5 s): the job is alive, waiting, and not resumed
        wait_for(lambda: client.job("outage", job_id)["updated_at"] - waiting["since"] >= 8, "an 8 s outage",
                 timeout=60)
        assert client.job("outage", job_id)["status"] == "running"
    finally:
        llm.start()
    view = client.wait("outage", job_id, timeout=300)
    assert view["status"] == "succeeded", {k: view.get(k) for k in ("error", "failures")}
    assert view["failures"] == [] and view["waiting"] is None
    assert int(view.get("resumes") or 0) == 0  # the watchdog did not re-enqueue the waiting job
    assert graph_snapshot(GraphStore(client.redis, "outage")) == graph_snapshot(GraphStore(client.redis, "steady"))
    assert _reports(client, "outage") == _reports(client, "steady")  # no extractive report for want of an endpoint


def test_an_llm_outage_longer_than_the_bound_fails_the_job_and_every_document_with_the_cause(outage_stack):
    """Guarantee: an endpoint away for longer than ``llm.outage_wait_s`` fails the job with "LLM unreachable for
    N s: <last error>", and no document of the job stays ``processing``: each ends ``failed`` with that cause.
    Checked: without the wait the job failed at its first LLM step after the chunks (``index: RuntimeError:
    connection: Connection error.``); without ``Job.fail`` ending the documents, the document stayed
    ``processing`` after its job failed."""
    client, llm, doc, _ = outage_stack
    job_id = _mid_extraction(client, "gone", doc)
    llm.stop()
    try:
        view = client.wait("gone", job_id, timeout=BOUND_S + 120)
    finally:
        llm.start()
    assert view["status"] == "failed", view
    assert view["error"].startswith("LLM unreachable for "), view["error"]
    assert "connection" in view["error"], view["error"]
    assert view["waiting"] is None
    docs = GraphStore(client.redis, "gone").documents(JobStore(client.redis, "gone").doc_ids(job_id))
    assert docs and {d.status for d in docs.values()} == {"failed"}, {d.id: d.status for d in docs.values()}
    assert all(d.error == view["error"] for d in docs.values()), [d.error for d in docs.values()]
