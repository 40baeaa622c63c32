"""Every query mode through the queues and workers; global map fan-out runs in parallel; a killed
map worker does not hang the query."""

from __future__ import annotations

import json
import os
import signal
import time

import pytest

from bench.harness.stacks import simulator as sim_process
from graphfleet_cli.local_client import LocalClient
from graphfleet_cli.query_client import run_query
from shared.domain.query.params import QueryParam
from shared.infra.redis.conn import EmbeddedRedis
from shared.infra.redis.keys import Keys
from tests.conftest import SAMPLE
from tests.integration.helpers import start_stack

pytestmark = pytest.mark.integration
MODES = ["local", "global", "naive", "hybrid", "causal", "graph"]


@pytest.fixture(scope="module")
def slow_llm():
    with sim_process(latency_ms=200) as url:
        yield url


@pytest.fixture(scope="module")
def ingested(redis_server, slow_llm, tmp_path_factory):
    stack = start_stack(redis_server.url, tmp_path_factory.mktemp("q"), slow_llm, concurrency=16)
    client = LocalClient(redis_server.url)
    job = client.ingest_files("qcarol", [SAMPLE])
    view = client.wait("qcarol", job["job_id"], timeout=900)
    assert view["status"] == "succeeded"
    yield stack, client, "qcarol"
    stack.stop()


@pytest.mark.parametrize("mode", MODES)
def test_every_mode_answers_with_a_budget_report(ingested, mode):
    _stack, client, tenant = ingested
    out = run_query(client, tenant, QueryParam(query="How does Scrooge change after the ghosts visit?", mode=mode,
                                              response_type="bullet_points", max_total_tokens=6000), 120)
    assert out["status"] == "succeeded", out
    assert out["answer_kind"] == "llm" and out["answer"].strip()
    budget = out["budget"]
    assert 0 < budget["total_tokens"] <= budget["total_allowed"]
    assert budget["sections"] and all(s["tokens_used"] <= s["tokens_allowed"] for s in budget["sections"])
    assert out["total_usage"]["calls"] >= 1
    assert sum(u["calls"] for u in out["usage"].values()) == out["total_usage"]["calls"]
    context = run_query(client, tenant, QueryParam(query="How does Scrooge change?", mode=mode,
                                                   only_need_context=True, max_total_tokens=6000), 120)
    assert context["status"] == "succeeded" and context["context"]
    assert context["answer"] == ""
    assert "answer" not in context["usage"] and "reduce" not in context["usage"]


def test_global_map_tasks_run_in_parallel_on_the_map_queue(ingested):
    _stack, client, tenant = ingested
    out = run_query(client, tenant, QueryParam(query="What are the main themes?", mode="global", global_selection="all",
                                              global_group_tokens=1500, global_direct_answer=False), 120)
    assert out["status"] == "succeeded" and not out["partial"]
    groups = out["details"]["groups"]
    assert groups >= 3
    times = [json.loads(v) for v in client.redis.hgetall(Keys(tenant).query_map_times(out["query_id"])).values()]
    assert len(times) == groups
    assert all(host.startswith("map") for _s, _e, host in times)
    starts, ends = sorted(t[0] for t in times), sorted(t[1] for t in times)
    assert starts[1] < ends[0], "the second map call started only after the first finished: no parallelism"
    assert out["usage"]["map"]["calls"] == groups and out["usage"]["reduce"]["calls"] == 1


def test_killed_map_worker_does_not_hang_the_query(tmp_path):
    # its own Redis: no other stack's map workers may pick up these map tasks
    redis_server = EmbeddedRedis(tmp_path / "redis", persist=False).start()
    with sim_process(latency_ms=3000) as llm:
        stack = start_stack(redis_server.url, tmp_path, llm, concurrency=8)
        try:
            client = LocalClient(redis_server.url)
            # reports need the LLM; build the graph without it would change the test, so ingest a small text
            doc = tmp_path / "d.txt"
            doc.write_text(SAMPLE.read_text(encoding="utf-8-sig")[30000:36000], encoding="utf-8")
            view = client.wait("killmap", client.ingest_files("killmap", [doc])["job_id"], timeout=600)
            assert view["status"] == "succeeded"
            from shared.infra.jobs.query_submit import submit_query

            param = QueryParam(query="What happens?", mode="global", global_selection="all", global_group_tokens=300,
                               deadline_s=8, global_direct_answer=False)
            qid = submit_query(client.redis, client.celery, "killmap", param)
            started = time.time()
            while client.job("killmap", qid)["progress"]["stage"] != "map":
                assert time.time() - started < 60
                time.sleep(0.05)
            time.sleep(0.5)  # map calls are in flight (3 s each)
            map_proc = next(p for name, p in stack.procs if name == "map")
            os.killpg(map_proc.pid, signal.SIGKILL)
            while client.job("killmap", qid)["status"] == "running":
                assert time.time() - started < 40, "query still running long after its deadline"
                time.sleep(0.2)
            view = client.job("killmap", qid)
            result = view.get("result") or view
            assert result["partial"] is True, {k: result[k] for k in ("details", "answer_kind", "partial_reason")}
            assert "did not answer" in result["partial_reason"]
        finally:
            stack.stop()
            redis_server.stop()


def test_default_global_reads_the_selected_reports_only(ingested):
    _stack, client, tenant = ingested
    q = "What does Marley's ghost warn Scrooge about?"
    full = run_query(client, tenant, QueryParam(query=q, mode="global", global_selection="all"), 120)
    mapped = run_query(client, tenant, QueryParam(query=q, mode="global", global_direct_answer=False), 120)
    assert full["status"] == mapped["status"] == "succeeded"
    sel = mapped["details"]["selection"]
    assert sel["strategy"] == "relevance" and 0 < sel["read"] < full["details"]["selection"]["read"]
    assert sel["selected_tokens"] <= sel["allowance"] < full["details"]["selection"]["full_scan_tokens"]
    assert mapped["usage"]["map"]["prompt_tokens"] < full["usage"]["map"]["prompt_tokens"] / 3
    assert mapped["usage"]["map"]["calls"] == mapped["details"]["groups"] >= 2
    cited = {c.strip() for cid, _score in mapped["details"]["points"] for c in cid.split(",")}
    assert cited and cited <= set(mapped["citations"])  # every point cites a report the map read
    # the default: the same selected groups fit one call, answered from the reports in the query task
    out = run_query(client, tenant, QueryParam(query=q, mode="global"), 120)
    assert out["status"] == "succeeded" and out["details"]["answer_path"] == "direct"
    assert out["details"]["selection"] == sel and out["citations"] == mapped["citations"]
    assert client.redis.hlen(Keys(tenant).query_map_times(out["query_id"])) == 0  # no map task was queued
    assert "map" not in out["usage"] and "reduce" not in out["usage"] and out["usage"]["answer"]["calls"] == 1
    assert out["usage"]["answer"]["prompt_tokens"] < mapped["usage"]["map"]["prompt_tokens"]
    assert "Marley" in out["answer"]
    context = run_query(client, tenant, QueryParam(query=q, mode="global", only_need_context=True), 120)
    assert "Marley" in context["context"]


def test_one_group_runs_its_map_in_the_query_task_and_skips_the_reduce(ingested):
    _stack, client, tenant = ingested
    # an allowance of one small group: the plan has a single map group
    param = QueryParam(query="Who is Bob Cratchit?", mode="global", response_type="bullet_points",
                       global_selection="relevance", global_selection_min_tokens=500, global_selection_share=0.001,
                       global_direct_answer=False)
    out = run_query(client, tenant, param, 120)
    assert out["status"] == "succeeded" and out["details"]["groups"] == 1
    assert client.redis.hlen(Keys(tenant).query_map_times(out["query_id"])) == 0  # no map task was queued
    assert out["usage"]["map"]["calls"] == 1 and "reduce" not in out["usage"]
    assert out["details"]["reduce"].startswith("skipped") and out["answer"].startswith("- ")
    # by default the one group's reports are the answer's context: one call, the same round trip count
    direct = run_query(client, tenant, param.model_copy(update={"global_direct_answer": True}), 120)
    assert direct["details"]["answer_path"] == "direct" and direct["details"]["groups"] == 1
    assert "map" not in direct["usage"] and direct["usage"]["answer"]["calls"] == 1
    assert direct["answer"].startswith("- ")
