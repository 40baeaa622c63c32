"""Metrics end to end: real Redis, real Celery worker processes (prefork and threads pools), the gateway
over HTTP, the LLM simulator. The gateway's /metrics must show every process's counters, and the token
counters must equal what the simulator served, exactly; cost must equal tokens x price."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections import defaultdict

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from graphfleet_cli.local_client import LocalClient
from graphfleet_cli.stack import Stack
from shared.domain.pricing import price_for
from shared.domain.query.params import QueryParam
from shared.infra.messaging.queueing import QUEUES
from shared.infra.redis.conn import free_port
from shared.infra.tenancy.tenants import Tenant, TenantStore
from shared.infra.tenancy.usage import read_usage
from tests.conftest import ROOT, SAMPLE, worker_env

pytestmark = pytest.mark.integration

GROUPS = [  # the default groups, with ingestion on a prefork pool (forked children write their own files)
    ("ingest", ["parser", "chunker", "extractor", "merger", "reporter", "indexer"], "prefork"),
    ("cluster", ["clusterer"], "solo"),
    ("query", ["query", "reducer"], "threads"),
    ("map", ["map_analyst"], "threads"),
]
CORPUS_CHARS = 40_000


@pytest.fixture(scope="module")
def stack(redis_server, simulator, tmp_path_factory):
    # GRAPHFLEET_METRICS_PORT: the first worker process to bind it serves this host's metrics (worker-only hosts)
    s = Stack(data_dir=tmp_path_factory.mktemp("mstack"), redis_url=redis_server.url, worker_concurrency=2,
              groups=GROUPS, gateway_port=free_port(),
              extra_env=worker_env(simulator, GRAPHFLEET_METRICS_PORT=free_port()))
    try:
        s.start()
        _wait_gateway(s.gateway_url)
        yield s
    finally:
        s.stop()


def _wait_gateway(url: str) -> None:
    for _ in range(300):
        try:
            if httpx.get(url + "/healthz", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise RuntimeError("gateway did not start")


def scrape(url: str) -> dict[str, list[tuple[dict, float]]]:
    resp = httpx.get(url + "/metrics", timeout=30)
    assert resp.status_code == 200
    assert resp.headers["content-type"].startswith("text/plain")
    return parse(resp.text)


def parse(text: str) -> dict[str, list[tuple[dict, float]]]:
    out: dict[str, list] = defaultdict(list)
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out[s.name].append((s.labels, s.value))
    return out


def total(got: dict, name: str, **match) -> float:
    return sum(v for labels, v in got[name] if all(labels.get(k) == want for k, want in match.items()))


def scrape_when(url: str, ready, timeout: float = 30.0) -> dict[str, list[tuple[dict, float]]]:
    """A scrape in which ``ready(scrape)`` holds, or the last one after ``timeout`` s. A job's counters are
    written by the process that ended it just after the job's end is published (``JobStore._end``: only the
    script that ends it knows it did), so a client can see the job done a moment before a scrape counts it."""
    deadline = time.monotonic() + timeout
    got = scrape(url)
    while not ready(got) and time.monotonic() < deadline:
        time.sleep(0.2)
        got = scrape(url)
    return got


def quiet_scrape(url: str, timeout: float = 30.0) -> dict[str, list[tuple[dict, float]]]:
    """A scrape once the stack's LLM counters held still for a second (or after ``timeout`` s). A fresh stack on
    the session's Redis may first finish work an earlier module's stack left queued there (a redelivered task, a
    query deadline): its calls are counted by this stack's processes before a test resets the simulator."""
    deadline = time.monotonic() + timeout
    got = scrape(url)
    while time.monotonic() < deadline:
        time.sleep(1.0)
        again = scrape(url)
        if total(again, "graphfleet_llm_tokens_total") == total(got, "graphfleet_llm_tokens_total"):
            return again
        got = again
    return got


def since(got: dict, base: dict) -> dict[str, list[tuple[dict, float]]]:
    """``got`` less ``base``, series by series (a series missing from ``base`` counts from zero)."""
    before = {(name, tuple(sorted(lab.items()))): v for name, rows in base.items() for lab, v in rows}
    return {name: [(lab, v - before.get((name, tuple(sorted(lab.items()))), 0.0)) for lab, v in rows]
            for name, rows in got.items()}


def sim_stats(simulator: str) -> dict:
    return httpx.get(simulator.removesuffix("/v1") + "/stats").json()


def assert_tokens_equal_simulator(got: dict, sim: dict) -> dict[str, float]:
    """Token counters == simulator counts, exactly; cost == tokens x price per model. Returns the totals."""
    chat_in = sum(v for lab, v in got["graphfleet_llm_tokens_total"]
                  if lab["direction"] == "input" and lab["stage"] != "embed")
    embed_in = total(got, "graphfleet_llm_tokens_total", direction="input", stage="embed")
    out = total(got, "graphfleet_llm_tokens_total", direction="output")
    assert chat_in == sim["chat"]["prompt_tokens"]
    assert out == sim["chat"]["completion_tokens"]
    assert embed_in == sim["embeddings"]["tokens"]
    by_model: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
    for lab, v in got["graphfleet_llm_tokens_total"]:
        by_model[lab["model"]][lab["direction"] == "output"] += v
    cost = defaultdict(float)
    for lab, v in got["graphfleet_llm_cost_usd_total"]:
        cost[lab["model"]] += v
    for model, (tin, tout) in by_model.items():
        pin, pout = price_for(model)
        assert cost[model] == pytest.approx((tin * pin + tout * pout) / 1e6, rel=1e-9), model
    embedding_requests = [(lab, v) for lab, v in got["graphfleet_llm_requests_total"] if lab.get("kind") == "embedding"]
    assert total(got, "graphfleet_llm_requests_total", kind="embedding") - total(
        got, "graphfleet_llm_errors_total", stage="embed") == sim["embeddings"]["calls"], (
        f"embedding requests by label: {embedding_requests}; simulator: {sim['embeddings']}")
    return {"chat_input": chat_in, "embed_input": embed_in, "output": out, "cost": sum(cost.values())}


def test_gateway_metrics_equal_simulator_counts(stack, simulator, tenant):
    client = LocalClient(stack.redis_url)
    TenantStore(client.redis).create(Tenant(id=tenant, tier="gold"))
    base = quiet_scrape(stack.gateway_url)  # LLM calls are compared from here on
    httpx.post(simulator.removesuffix("/v1") + "/stats/reset")
    doc = stack.data_dir / "carol-part.txt"
    doc.write_text(SAMPLE.read_text(encoding="utf-8-sig")[:CORPUS_CHARS], encoding="utf-8")
    job_id = client.ingest_files(tenant, [doc])["job_id"]
    view = client.wait(tenant, job_id, timeout=600)
    assert view["status"] == "succeeded", view
    chunks = view["progress"]["chunks_total"]

    got = scrape_when(stack.gateway_url, lambda g: total(g, "graphfleet_jobs_total", kind="ingest",
                                                         status="succeeded", tier="gold") >= 1)
    sim = sim_stats(simulator)
    totals = assert_tokens_equal_simulator(since(got, base), sim)
    print(f"\ningest: simulator {sim['chat']} embeddings {sim['embeddings']}; exported {totals}")
    assert totals["chat_input"] > 0 and totals["output"] > 0 and totals["embed_input"] > 0
    # the job's own usage (UsageRecorder -> Redis) agrees with the counters, besides what the tenant's usage books
    # outside the job: the embedder probe of a deployment's first index (one 20-word call, run by the query worker
    # once it warmed the new index, while the job waits for that warm-up; skipped when an earlier test measured it)
    outside = [r for r in read_usage(client.redis, tenant) if r.job_id != job_id]
    assert all(r.stage == "embed" and not r.completion_tokens for r in outside) and len(outside) <= 1, outside
    probe = sum(r.prompt_tokens for r in outside)
    assert view["usage"]["prompt_tokens"] + probe == totals["chat_input"] + totals["embed_input"]
    assert view["usage"]["completion_tokens"] == totals["output"]
    # labels: tier from the tenant record, bounded stages, no tenant ids. Only what grew since the quiet scrape
    # must be gold: series of other tiers may be there, at zero (a query worker creates the series of a tenant's
    # answers when it warms it) or counting an earlier module's leftover query job (the session's Redis holds
    # other tests' tenants), which the quiet scrape waited out
    for lab, v in since(got, base)["graphfleet_llm_tokens_total"]:
        assert "tenant" not in lab and (lab["tier"] == "gold" or v == 0), lab
    assert {lab["stage"] for lab, _v in got["graphfleet_llm_tokens_total"]} >= {"extract", "glean", "report",
                                                                                 "embed"}
    assert total(got, "graphfleet_llm_tokens_total", stage="embed", direction="input", queue="indexer") > 0
    # pipeline: tasks (prefork children), chunks, jobs, queue depth (read from Redis at scrape)
    assert total(got, "graphfleet_tasks_total", queue="extractor", outcome="succeeded") == chunks
    assert total(got, "graphfleet_tasks_total", queue="extractor", outcome="started") == chunks
    assert total(got, "graphfleet_task_duration_seconds_count", queue="extractor") == chunks
    # every task's wait in its queue, from when its message says it was ready: each message is sent with it
    for queue in {lab["queue"] for lab, v in got["graphfleet_tasks_total"] if v and lab["outcome"] == "started"}:
        started = total(got, "graphfleet_tasks_total", queue=queue, outcome="started")
        assert total(got, "graphfleet_task_queue_wait_seconds_count", queue=queue) == started, queue
    assert total(got, "graphfleet_task_queue_wait_seconds_sum", queue="extractor") > 0
    assert total(got, "graphfleet_chunks_processed_total", outcome="ok") == chunks
    assert total(got, "graphfleet_jobs_total", kind="ingest", status="succeeded", tier="gold") == 1
    assert total(got, "graphfleet_job_duration_seconds_count", kind="ingest", tier="gold") == 1
    assert {lab["queue"] for lab, _v in got["graphfleet_queue_depth"]} == set(QUEUES)
    # every queue has a live consumer (worker heartbeats), and the gateway counted this scrape's predecessors
    # (at least one: the session's Redis is shared, so another test's stack stopped within the window still counts)
    consumers = {lab["queue"]: v for lab, v in got["graphfleet_queue_consumers"]}
    assert set(consumers) == set(QUEUES) and min(consumers.values()) >= 1, consumers
    assert total(got, "graphfleet_http_requests_total", route="/healthz", method="GET", status="2xx") >= 1
    assert total(got, "graphfleet_tasks_in_progress") == 0
    # the worker-side exporter reads the same host directory: same counts
    worker = scrape(f"http://127.0.0.1:{stack.extra_env['GRAPHFLEET_METRICS_PORT']}")
    assert total(worker, "graphfleet_llm_tokens_total") == total(got, "graphfleet_llm_tokens_total")
    assert total(worker, "graphfleet_tasks_total") == total(got, "graphfleet_tasks_total")

    # the query worker rebuilt this tenant's caches when the pipeline announced its index update
    # (asynchronously: wait for it, within a bound)
    deadline = time.monotonic() + 60
    while total(got, "graphfleet_query_cache_warmup_seconds_count", queue="query") < 1 and time.monotonic() < deadline:
        time.sleep(0.2)
        got = scrape(stack.gateway_url)
    assert total(got, "graphfleet_query_cache_warmup_seconds_count", queue="query") >= 1

    # queries of every LLM-using flavour: their phases are stages of their own
    for mode in ("local", "global", "naive"):
        # the global full scan in small groups: several map tasks on the map_analyst queue
        extra = {"global_selection": "all", "global_group_tokens": 1000, "global_direct_answer": False}
        extra = extra if mode == "global" else {}
        out = client.query(tenant, QueryParam(query="What does Scrooge learn?", mode=mode, **extra), timeout=300)
        assert out["status"] == "succeeded", out
    got = scrape_when(stack.gateway_url, lambda g: total(g, "graphfleet_jobs_total", kind="query",
                                                         status="succeeded", tier="gold") >= 3)
    totals = assert_tokens_equal_simulator(since(got, base), sim_stats(simulator))
    print(f"after queries: exported {totals}")
    assert total(got, "graphfleet_jobs_total", kind="query", status="succeeded", tier="gold") == 3
    assert total(got, "graphfleet_job_duration_seconds_count", kind="query", status="succeeded", tier="gold") == 3
    assert total(got, "graphfleet_llm_tokens_total", stage="map") > 0
    assert total(got, "graphfleet_llm_tokens_total", stage="answer") > 0
    assert total(got, "graphfleet_tasks_total", queue="map_analyst", outcome="succeeded") > 0
    client.close()


def test_counters_survive_process_exit_without_leaking_files(stack, simulator):
    """After every process of the stack stopped, the directory holds archive files only and a scrape of it
    still shows every count (here: the simulator's totals of the previous test)."""
    before = scrape(stack.gateway_url)
    want = total(before, "graphfleet_llm_tokens_total")
    want_tasks = total(before, "graphfleet_tasks_total")
    stack.stop()
    names = sorted(p.name for p in stack.metrics_dir.glob("*.db"))
    assert all("_archive" in n for n in names), names
    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(stack.metrics_dir), "PYTHONPATH": str(ROOT)}
    code = ("import sys; from shared.infra.observability.metrics import metrics_response; "
            "sys.stdout.write(metrics_response()[0].decode())")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60,
                         check=True)
    after = parse(out.stdout)
    assert total(after, "graphfleet_llm_tokens_total") == want > 0
    assert total(after, "graphfleet_tasks_total") >= want_tasks  # a delayed query deadline task may add some
