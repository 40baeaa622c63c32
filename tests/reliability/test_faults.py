"""Fault tests: a worker SIGKILLed mid-ingestion, a faulty LLM, Redis restarted mid-job.

Real Redis, real Celery worker processes, the LLM simulator over HTTP. Killed map tasks of a global
query are covered by ``tests/integration/test_queries.py::test_killed_map_worker_does_not_hang_the_query``
(the query ends with ``partial: true`` and a "did not answer" reason); not repeated here.
"""

from __future__ import annotations

import os
import signal
import time

import pytest

from graphfleet_cli.local_client import LocalClient
from llm_simulator.malformed import RECORD_TYPES
from shared.infra.jobs.store import JobStore
from shared.infra.messaging.queueing import WORKER_GROUPS
from shared.infra.redis.conn import EmbeddedRedis
from shared.infra.redis.keys import Keys
from shared.infra.store.redis_graph import GraphStore
from tests.conftest import SAMPLE
from tests.integration.helpers import graph_snapshot, start_stack
from tests.reliability.conftest import FAST_WATCHDOG, sim, sim_stats
from tests.reliability.conftest import excerpt as _excerpt
from tests.reliability.conftest import wait_for as _wait_for

pytestmark = pytest.mark.integration

VISIBILITY_S = 15  # kombu redelivers an unacked message this long after it was delivered


def _s(v) -> str:
    return v.decode() if isinstance(v, bytes) else v



def _ingest(client: LocalClient, tenant: str, path) -> dict:
    job = client.ingest_files(tenant, [path])
    return client.wait(tenant, job["job_id"], timeout=900)


def _chunk_accounting(client: LocalClient, tenant: str, view: dict) -> tuple[set[str], set[str], dict]:
    """(chunks of the job, chunks with an extraction, failures by chunk id) straight from Redis."""
    k = Keys(tenant)
    chunks = {_s(c) for c in client.redis.smembers(k.job_chunks(view["id"]))}
    extracted = {c for c in chunks if client.redis.exists(k.extraction(c))}
    failures = {f["chunk_id"]: f for f in view["failures"]}
    return chunks, extracted, failures


def _restart_ingest_worker(stack) -> None:
    """What a supervisor (systemd, Kubernetes) does: a fresh worker on the dead one's queues."""
    _name, queues, pool = next(g for g in WORKER_GROUPS if g[0] == "ingest")
    stack.procs.append(("ingest-restarted", stack._start_worker("ingest-restarted", queues, pool)))
    stack.wait_ready()


def test_sigkilled_ingest_worker_loses_and_duplicates_no_chunk(private_redis, tmp_path):
    """Guarantee: acks-late delivery + idempotent tasks. A SIGKILLed worker's in-flight and prefetched
    messages stay in kombu's ``unacked`` hash and are redelivered to the next worker; the result equals
    an undisturbed run. Without acks_late (``task_acks_late=False``) the messages are acked on receipt:
    ``unacked`` is empty after the kill (first assertion below) and the job never leaves ``running``
    (``client.wait`` raises TimeoutError)."""
    with sim(latency_ms=400) as llm:
        stack = start_stack(private_redis.url, tmp_path / "stack", llm, concurrency=4,
                            GRAPHFLEET_WORKERS__VISIBILITY_TIMEOUT_S=VISIBILITY_S, **FAST_WATCHDOG)
        try:
            client = LocalClient(private_redis.url)
            undisturbed = _ingest(client, "undisturbed", SAMPLE)
            assert undisturbed["status"] == "succeeded", undisturbed["failures"]
            expected = graph_snapshot(GraphStore(client.redis, "undisturbed"))

            job_id = client.ingest_files("killed", [SAMPLE])["job_id"]

            def in_flight():
                p = client.job("killed", job_id)["progress"]
                return p["chunks_total"] and 4 <= p["chunks_done"] <= p["chunks_total"] - 12

            _wait_for(in_flight, "extraction in flight")
            worker = next(p for name, p in stack.procs if name == "ingest")
            os.killpg(worker.pid, signal.SIGKILL)
            worker.wait()
            stack.procs = [(n, p) for n, p in stack.procs if p is not worker]
            assert client.redis.hlen("unacked") > 0, "the killed worker's messages were acked before they ran"
            mid = client.job("killed", job_id)
            assert mid["status"] == "running" and mid["progress"]["chunks_done"] < mid["progress"]["chunks_total"]

            # a new worker restores messages unacked for longer than the visibility timeout when it starts
            _wait_for(lambda: all(time.time() - score > VISIBILITY_S + 1 for _t, score in
                                  client.redis.zrange("unacked_index", 0, -1, withscores=True)),
                      "the visibility timeout of the orphaned messages", timeout=VISIBILITY_S + 30, every=0.5)
            _restart_ingest_worker(stack)
            view = client.wait("killed", job_id, timeout=900)

            assert view["status"] == "succeeded", view["failures"]
            chunks, extracted, failures = _chunk_accounting(client, "killed", view)
            assert failures == {}
            assert chunks == extracted, f"lost chunks: {sorted(chunks - extracted)[:5]}"
            assert view["progress"]["chunks_total"] == undisturbed["progress"]["chunks_total"] == len(chunks)
            assert view["progress"]["chunks_done"] == len(chunks)
            got = graph_snapshot(GraphStore(client.redis, "killed"))
            assert got["entities"] == expected["entities"]  # source_ids would repeat if a chunk counted twice
            assert got["relations"] == expected["relations"]  # weights would double on a duplicate
            assert got["communities"] == expected["communities"]
        finally:
            stack.stop()



def _assert_every_chunk_accounted_for(client: LocalClient, tenant: str, view: dict) -> dict:
    """chunks total == done + failed; each chunk has an extraction or a failure with a cause, never both."""
    chunks, extracted, failures = _chunk_accounting(client, tenant, view)
    progress = view["progress"]
    assert progress["chunks_total"] == len(chunks) == progress["chunks_done"] + progress["chunks_failed"]
    assert extracted | set(failures) == chunks, "a chunk is neither processed nor listed as failed"
    assert not extracted & set(failures), "a chunk is both processed and failed"
    for failure in failures.values():
        assert failure["stage"] == "extract"
        assert failure["cause"].startswith("llm:"), failure  # e.g. "llm:http_503: ..." or "llm:rate_limited: ..."
    return failures


def test_faulty_llm_with_retries_the_job_succeeds_and_counts_every_chunk(private_redis, tmp_path):
    """Guarantee: 5xx and 429 are retried (429 after its Retry-After) and malformed extraction answers are
    parsed leniently, so the job succeeds with every chunk processed; malformed answers leave warnings on
    the job. Checked: with ``GRAPHFLEET_LLM__MAX_RETRIES=0`` the same run ends with failed chunks or a
    failed job (see the next test), so the ``failures == {}`` assertion depends on the retries."""
    doc = _excerpt(tmp_path, 0, 30_000)
    # 10% 5xx, 10% malformed answers, and an RPM limit that the extraction burst exceeds (429 + Retry-After)
    with sim(error_rate=0.10, malformed_rate=0.10, rate_limit_rpm=15, seed=11) as llm:
        stack = start_stack(private_redis.url, tmp_path / "stack", llm, concurrency=8)
        try:
            client = LocalClient(private_redis.url)
            view = _ingest(client, "retried", doc)
        finally:
            stack.stop()
        stats = sim_stats(llm)
    assert stats["errors"]["5xx"] > 0 and stats["errors"]["429"] > 0, stats["errors"]
    assert view["status"] == "succeeded", {k: view.get(k) for k in ("error", "failures")}
    assert _assert_every_chunk_accounted_for(client, "retried", view) == {}
    # every failed call is recorded in the job's usage
    assert view["usage"].get("errors", 0) >= stats["errors"]["5xx"] + stats["errors"]["429"]
    # a malformed extraction answer leaves parse warnings on the job (a malformed report is another matter: a
    # chatty one still parses, a broken one lands in ``:report_errors`` with an extractive report in its place)
    if any(stats["malformed_by_type"].get(kind) for kind in RECORD_TYPES):
        assert client.redis.hlen(Keys("retried").job(view["id"]) + ":warnings") > 0


def test_faulty_llm_without_retries_failures_are_explicit(private_redis, tmp_path):
    """Guarantee: a chunk whose extraction fails is recorded with its cause and still counts as finished,
    and a failure in a later stage fails the job with the stage and cause; the job always ends. With
    ``max_retries=0`` 10% of calls fail for good (the fault plan is seeded: the same calls every run); with
    ``outage_wait_s=0`` a job does not wait for the LLM (``tests/reliability/test_llm_outage.py``) either.
    A failed extraction goes through the ``except LLMError`` in ``workers.ingest_tasks.extract_chunk``
    (cause ``llm:<cause>``); if it escaped, ``workers.delivery.JobTask.on_failure`` would record it with
    cause ``LLMError: ...`` (the prefix assertion fails); without either the chunk never finishes and
    ``client.wait`` raises TimeoutError."""
    doc = _excerpt(tmp_path, 0, 60_000)
    with sim(error_rate=0.10, malformed_rate=0.02, seed=11) as llm:
        stack = start_stack(private_redis.url, tmp_path / "stack", llm, concurrency=8,
                            GRAPHFLEET_LLM__MAX_RETRIES=0, GRAPHFLEET_LLM__OUTAGE_WAIT_S=0)
        try:
            client = LocalClient(private_redis.url)
            view = _ingest(client, "faulty", doc)
        finally:
            stack.stop()
        stats = sim_stats(llm)
    assert stats["errors"]["5xx"] > 0, stats["errors"]
    assert view["status"] in ("succeeded", "failed"), view["status"]
    failures = _assert_every_chunk_accounted_for(client, "faulty", view)
    assert failures, "no extraction failed: the test does not exercise the failure path"
    if view["status"] == "failed" and not view.get("result"):  # a later stage failed: it says which and why
        assert ":" in view["error"] and "Error" in view["error"], view["error"]
    else:
        docs = GraphStore(client.redis, "faulty").documents(JobStore(client.redis, "faulty").doc_ids(view["id"]))
        assert [d.error for d in docs.values()] == [f"{len(failures)} chunk(s) failed"]


def test_redis_restart_mid_job_resumes_from_the_append_only_file(tmp_path):
    """Guarantee: with AOF persistence (``EmbeddedRedis(persist=True)``, appendfsync everysec) queued and
    unacked messages and job state survive a Redis restart; workers reconnect and the job ends (here:
    succeeds, with the same graph as an undisturbed run) instead of hanging in ``running``. Checked: before
    ``workers.delivery`` requeued tasks that hit Redis errors, the job hung with 3 of 7 chunks done and
    empty queues (the failed tasks were acked); before ``celery_patches/redis_broken_connection.py`` the ingest
    worker hit kombu's AttributeError on reconnect and stopped consuming, and the job hung with its messages queued.
    Before the job watchdog, about 1 run in 4 lost one extraction message across the restart (in no queue
    and not in ``unacked``) and the job stayed running with 6 of 7 chunks done."""
    redis_dir = tmp_path / "redis"
    server = EmbeddedRedis(redis_dir, persist=True).start()
    doc = _excerpt(tmp_path, 30_000, 60_000)
    with sim(latency_ms=400) as llm:
        stack = start_stack(server.url, tmp_path / "stack", llm, concurrency=4,
                            GRAPHFLEET_WORKERS__VISIBILITY_TIMEOUT_S=VISIBILITY_S, **FAST_WATCHDOG)
        try:
            client = LocalClient(server.url)
            undisturbed = _ingest(client, "steady", doc)
            assert undisturbed["status"] == "succeeded"
            job_id = client.ingest_files("restarted", [doc])["job_id"]
            _wait_for(lambda: client.job("restarted", job_id)["progress"]["chunks_done"] >= 1, "extraction started")
            server.stop()  # SHUTDOWN: the AOF is flushed
            time.sleep(1.0)
            server = EmbeddedRedis(redis_dir, port=server.port, persist=True).start()
            client = LocalClient(server.url)
            view = client.wait("restarted", job_id, timeout=240)
            assert view["status"] == "succeeded", view
            assert view["failures"] == []
            assert graph_snapshot(GraphStore(client.redis, "restarted")) == graph_snapshot(
                GraphStore(client.redis, "steady"))
        finally:
            stack.stop()
            server.stop()


def test_lost_messages_are_enqueued_again_by_the_job_watchdog(private_redis, tmp_path):
    """Guarantee: a job never stays ``running`` because a message vanished from the broker (not a lost
    worker: that is the unacked hash's job). Three extraction messages and later the whole reporter
    queue are deleted from Redis; the watchdog (``shared/pipeline/watchdog.py``) finds the job stalled
    with none of its messages queued or in flight, re-enqueues exactly the missing steps, and the job
    succeeds with every chunk extracted once. Without the watchdog ``client.wait`` raises TimeoutError."""
    doc = _excerpt(tmp_path, 0, 40_000)
    with sim(latency_ms=300) as llm:
        stack = start_stack(private_redis.url, tmp_path / "stack", llm, concurrency=2, **FAST_WATCHDOG)
        try:
            client = LocalClient(private_redis.url)
            job_id = client.ingest_files("lossy", [doc])["job_id"]
            _wait_for(lambda: client.redis.llen("extractor") >= 4, "extraction messages queued", every=0.01)
            lost = [client.redis.rpop("extractor") for _ in range(3)]
            assert all(job_id.encode() in m for m in lost)
            _wait_for(lambda: client.redis.llen("reporter") > 0, "report messages queued", every=0.01)
            lost_reports = client.redis.delete("reporter")
            view = client.wait("lossy", job_id, timeout=300)
            assert view["status"] == "succeeded", view
            chunks, extracted, failures = _chunk_accounting(client, "lossy", view)
            assert failures == {} and chunks == extracted
            assert int(view["resumes"]) >= 1 + lost_reports
            assert client.redis.hget(Keys("lossy").job(job_id), "resumes") == str(view["resumes"]).encode()
            assert GraphStore(client.redis, "lossy").reports(), "no community report was written"
            deliveries = {_s(k): int(v) for k, v in client.redis.hgetall(Keys("lossy").deliveries(job_id)).items()}
            assert all(n == 1 for k, n in deliveries.items() if k.startswith("graphfleet.extract_chunk:")), deliveries
        finally:
            stack.stop()
