"""Ingestion end to end: real Redis, real Celery worker processes, the LLM simulator over HTTP."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import httpx
import pytest

from graphfleet_cli.local_client import LocalClient
from shared.infra.store.redis_graph import GraphStore
from shared.infra.tenancy.usage import read_usage
from tests.conftest import ROOT, SAMPLE
from tests.integration.helpers import graph_snapshot, start_stack

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def stack(redis_server, simulator, tmp_path_factory):
    s = start_stack(redis_server.url, tmp_path_factory.mktemp("stack"), simulator, concurrency=4)
    yield s
    s.stop()


def _ingest(client: LocalClient, tenant: str) -> dict:
    submitted = client.ingest_files(tenant, [SAMPLE])
    return client.wait(tenant, submitted["job_id"], timeout=600)


def test_christmas_carol_builds_graph_communities_and_reports(stack, simulator, tenant):
    client = LocalClient(stack.redis_url)
    httpx.post(simulator.removesuffix("/v1") + "/stats/reset")
    view = _ingest(client, tenant)
    assert view["status"] == "succeeded", view
    assert view["failures"] == []
    stats = client.stats(tenant)
    assert stats["documents"] == 1
    assert stats["chunks"] == view["progress"]["chunks_total"] >= 30
    assert stats["entities"] > 100
    assert stats["relations"] > 100
    levels = {int(k): v for k, v in stats["communities_by_level"].items()}
    assert len(levels) >= 2, levels
    store = GraphStore(client.redis, tenant)
    communities = store.communities()
    reports = store.reports()
    assert set(reports) == set(communities)
    assert all(r.title and r.summary for r in reports.values())
    for cid, report in reports.items():  # tiny communities get extractive reports (settings.report.min_llm_members)
        assert report.generated_by == ("llm" if len(communities[cid].nodes) >= 3 else "extractive")
    assert sum(r.generated_by == "llm" for r in reports.values()) >= 10
    # usage recorded per call equals what the simulator served
    sim = httpx.get(simulator.removesuffix("/v1") + "/stats").json()
    usage = view["usage"]
    assert usage["by_stage"]["extract"]["calls"] == stats["chunks"]
    # besides the job's calls, the query worker's warm-up may probe the embedder once (booked to the tenant, no job)
    probe = sum(r.prompt_tokens for r in read_usage(client.redis, tenant) if not r.job_id)
    assert usage["prompt_tokens"] + probe == sim["chat"]["prompt_tokens"] + sim["embeddings"]["tokens"]
    assert usage["completion_tokens"] == sim["chat"]["completion_tokens"]
    # every chunk and entity is embedded
    from shared.infra.store.redis_vectors import RedisVectorStore

    vectors = RedisVectorStore(client.redis)
    assert vectors.count(tenant, "chunks") == stats["chunks"]
    assert vectors.count(tenant, "entities") == stats["entities"]


def test_reingest_changes_nothing_and_costs_nothing(stack, tenant):
    client = LocalClient(stack.redis_url)
    first = _ingest(client, tenant)
    assert first["status"] == "succeeded"
    before = graph_snapshot(GraphStore(client.redis, tenant))
    stats_before = client.stats(tenant)
    second = _ingest(client, tenant)
    assert second["status"] == "succeeded"
    assert client.stats(tenant) == stats_before
    assert graph_snapshot(GraphStore(client.redis, tenant)) == before
    assert second["usage"]["prompt_tokens"] == 0, second["usage"]
    assert second["usage"]["completion_tokens"] == 0


def test_cli_ingest_json_contract(stack, tenant, tmp_path):
    doc = tmp_path / "story.md"
    doc.write_text(SAMPLE.read_text(encoding="utf-8-sig")[20000:32000], encoding="utf-8")
    env = {**os.environ, "GRAPHFLEET_REDIS_URL": stack.redis_url}
    out = subprocess.run(
        [sys.executable, "-m", "graphfleet_cli.main", "ingest", str(tmp_path), "--tenant", tenant, "--wait", "--json"],
        capture_output=True, text=True, env=env, cwd=ROOT, timeout=300, check=False,
    )
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    for key in ("job_id", "status", "documents", "chunks", "entities", "relations", "communities_by_level",
                "reports", "failed_chunks", "llm_calls", "prompt_tokens", "completion_tokens", "seconds"):
        assert key in result, key
    assert result["status"] == "succeeded"
    assert result["documents"] == 1 and result["entities"] > 0 and result["llm_calls"] > 0
    stats = subprocess.run(
        [sys.executable, "-m", "graphfleet_cli.main", "stats", "--tenant", tenant, "--json"],
        capture_output=True, text=True, env=env, cwd=ROOT, timeout=60, check=True,
    )
    assert json.loads(stats.stdout)["entities"] == result["entities"]
    graphml = tmp_path / "g.graphml"
    subprocess.run(
        [sys.executable, "-m", "graphfleet_cli.main", "export", "--tenant", tenant, "--graphml", str(graphml)],
        capture_output=True, text=True, env=env, cwd=ROOT, timeout=60, check=True,
    )
    import networkx as nx

    g = nx.read_graphml(graphml)
    assert g.number_of_nodes() == result["entities"]
    assert g.number_of_edges() == result["relations"]
