"""Structured logs and traces across gateway -> queue -> worker, with a real Celery worker process.

The gateway runs in-process (TestClient, real Redis); a real ``celery worker`` subprocess consumes the ``query``
queue of the same Redis database. A query submitted through the gateway runs in the worker; then:

* ``GRAPHFLEET_LOG_FORMAT=json``: every line the worker logged parses as JSON, and the lines of the query's task
  carry ``job_id``, ``tenant``, ``task`` and ``queue``; the gateway's submission event carries them too.
* ``GRAPHFLEET_OTEL_ENABLED=true`` (spans written to files, ``GRAPHFLEET_OTEL_FILE``): the worker's task span is in
  the trace of the gateway's request span, child of the producer span whose context the message carried.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import time
import uuid

import pytest

from shared.infra.jobs.store import TERMINAL, JobStore
from shared.infra.messaging.messages import RunQuery
from shared.infra.observability import tracing
from shared.infra.observability.log_setup import JsonFormatter
from tests.conftest import ROOT, worker_env
from tests.gateway.helpers import make_client, new_tenant, with_a_document

SAFETY_TIMEOUT_S = 120.0  # a stuck worker fails the test instead of hanging it; never a pass criterion


def start_worker(tmp_path, gw_env, **env) -> tuple[subprocess.Popen, object]:
    full = {**os.environ, **worker_env(None, **env), "GRAPHFLEET_REDIS_URL": os.environ["GRAPHFLEET_REDIS_URL"]}
    full.pop("PROMETHEUS_MULTIPROC_DIR", None)
    cmd = [sys.executable, "-m", "celery", "-A", "workers.celery_app", "worker", "-Q", "query", "-P", "solo",
           "-n", f"obs-{uuid.uuid4().hex[:6]}@%h", "-l", "INFO", "--without-gossip", "--without-mingle",
           "--without-heartbeat"]
    stderr = open(tmp_path / "worker.stderr", "wb")  # noqa: SIM115 - closed by stop_worker
    proc = subprocess.Popen(cmd, cwd=ROOT, env=full, stdout=subprocess.DEVNULL, stderr=stderr)
    return proc, stderr


def stop_worker(proc: subprocess.Popen, stderr) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    stderr.close()


def run_query(api, who: dict, redis) -> str:
    with_a_document(redis, who["id"])
    r = api.post("/v1/queries", json={"query": "Who is Marley?"}, headers=who["headers"])
    assert r.status_code == 202, r.text
    query_id = r.json()["query_id"]
    deadline = time.monotonic() + SAFETY_TIMEOUT_S
    while JobStore(redis, who["id"]).status(query_id) not in TERMINAL:
        assert time.monotonic() < deadline, "the worker never finished the query"
        time.sleep(0.1)
    return query_id


def test_json_logs_carry_the_job_context(gw_env, gw_redis, tmp_path, caplog):
    gw_env.setenv("GRAPHFLEET_LOG_FORMAT", "json")
    proc, stderr = start_worker(tmp_path, gw_env, GRAPHFLEET_LOG_FORMAT="json")
    try:
        with make_client() as api, caplog.at_level(logging.INFO):
            who = new_tenant(api, "logs")
            query_id = run_query(api, who, gw_redis)
    finally:
        stop_worker(proc, stderr)
    lines = [line for line in (tmp_path / "worker.stderr").read_text().splitlines() if line.strip()]
    events = [json.loads(line) for line in lines]  # every line is one JSON event
    assert all({"ts", "level", "logger", "message"} <= set(e) for e in events)
    mine = [e for e in events if e.get("job_id") == query_id]
    assert mine, lines[-20:]
    assert all(e["tenant"] == who["id"] and e["task"] == RunQuery.TASK and e["queue"] == "query"
               and e["task_id"] for e in mine), mine
    assert any("succeeded" in e["message"] for e in mine), mine  # Celery's own task line carries the context
    submitted = [r for r in caplog.records if getattr(r, "job_id", None) == query_id]
    assert submitted, "the gateway logged no submission event"
    event = json.loads(JsonFormatter().format(submitted[0]))
    assert event["tenant"] == who["id"] and event["job_id"] == query_id and event["kind"] == "query"


def _spans(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@pytest.fixture()
def traced(gw_env, tmp_path):
    gw_env.setenv("GRAPHFLEET_OTEL_ENABLED", "true")
    gw_env.setenv("GRAPHFLEET_OTEL_FILE", str(tmp_path / "gateway-spans.jsonl"))
    yield tmp_path
    tracing.reset()


def test_a_submitted_job_is_one_trace_from_gateway_to_worker(traced, gw_env, gw_redis, tmp_path):
    worker_spans = tmp_path / "worker-spans.jsonl"
    proc, stderr = start_worker(tmp_path, gw_env, GRAPHFLEET_OTEL_ENABLED="true", GRAPHFLEET_OTEL_FILE=worker_spans)
    try:
        with make_client() as api:
            who = new_tenant(api, "traces")
            query_id = run_query(api, who, gw_redis)
    finally:
        stop_worker(proc, stderr)
    tracing.flush()
    gateway = _spans(tmp_path / "gateway-spans.jsonl")
    request = [s for s in gateway if s["name"] == "POST /v1/queries" and s["kind"] == "SpanKind.SERVER"]
    assert len(request) == 1, [s["name"] for s in gateway]
    trace_id = request[0]["context"]["trace_id"]
    send = [s for s in gateway if s["name"] == f"send {RunQuery.TASK}"]
    assert len(send) == 1 and send[0]["context"]["trace_id"] == trace_id, send
    task = [s for s in _spans(worker_spans) if s["name"] == f"run/{RunQuery.TASK}"]
    assert len(task) == 1, (tmp_path / "worker.stderr").read_text()[-3000:]
    assert task[0]["context"]["trace_id"] == trace_id  # one trace: gateway request -> message -> worker task
    assert task[0]["parent_id"] == send[0]["context"]["span_id"]  # the context came in the message headers
    assert task[0]["attributes"].get("celery.task_name") == RunQuery.TASK
    assert query_id
