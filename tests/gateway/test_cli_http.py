"""``graphfleet ingest|query|stats|export`` against the gateway (``GRAPHFLEET_URL``) and against the
local stack: the same ``--json`` shapes (and, for the same input, the same graph)."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys

import networkx as nx
import pytest

from graphfleet_cli.progress import ProgressLine, progress_text
from tests.conftest import ROOT, SAMPLE

pytestmark = pytest.mark.integration


def _env(**extra) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GRAPHFLEET_")}
    env.update(extra)
    return env


def _cli(env: dict, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "graphfleet_cli.main", *args], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="module")
def modes(live, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("cli")
    doc = tmp / "stave.txt"
    doc.write_text(SAMPLE.read_text(encoding="utf-8-sig")[130000:142000], encoding="utf-8")
    api = live.new_tenant("cli")
    http = _env(GRAPHFLEET_URL=live.url, GRAPHFLEET_API_KEY=api.key, GRAPHFLEET_DATA_DIR=str(tmp / "h"))
    local = _env(GRAPHFLEET_REDIS_URL=live.stack.redis_url, GRAPHFLEET_BROKER_URL=live.stack.broker_url or "",
                 GRAPHFLEET_DATA_DIR=str(tmp / "l"))
    local_tenant = f"local-{api.id}"
    return {"http": (http, []), "local": (local, ["--tenant", local_tenant]), "doc": doc, "tmp": tmp, "api": api}


@pytest.fixture(scope="module")
def ingested(modes):
    # a deployment's first index probes the embedder once, booked to that job (shared.infra.store.warmup): done
    # here first, in a tenant of its own, so the two ingestions compared below make the same calls
    tiny = modes["tmp"] / "tiny.txt"
    tiny.write_text("Marley was dead, to begin with. Scrooge signed the register of his burial.\n", encoding="utf-8")
    probe = _cli(modes["local"][0], "ingest", str(tiny), "--tenant", f"probe-{modes['api'].id}", "--wait", "--json")
    assert probe.returncode == 0, probe.stderr
    out = {}
    for mode in ("http", "local"):
        env, tenant = modes[mode]
        run = _cli(env, "ingest", str(modes["doc"]), *tenant, "--wait", "--json")
        assert run.returncode == 0, run.stderr
        out[mode] = json.loads(run.stdout)
    return out


def test_ingest_json_is_the_same_shape_and_graph_in_both_modes(ingested):
    http, local = ingested["http"], ingested["local"]
    assert list(http) == list(local)
    assert http["status"] == local["status"] == "succeeded"
    for key in ("documents", "chunks", "entities", "relations", "communities_by_level", "reports", "job_documents",
                "job_chunks", "failed_chunks", "llm_calls", "prompt_tokens", "completion_tokens"):
        assert http[key] == local[key], key
    assert set(http["usage_by_stage"]) == set(local["usage_by_stage"])


def test_query_stats_and_export_in_both_modes(modes, ingested):
    outputs = {}
    for mode in ("http", "local"):
        env, tenant = modes[mode]
        query = _cli(env, "query", "What does Scrooge see?", "--mode", "naive", *tenant, "--json",
                     "--max-total-tokens", "3000")
        assert query.returncode == 0, query.stderr
        stats = _cli(env, "stats", *tenant, "--json")
        assert stats.returncode == 0, stats.stderr
        target = modes["tmp"] / f"{mode}.graphml"
        export = _cli(env, "export", *tenant, "--graphml", str(target))
        assert export.returncode == 0, export.stderr
        outputs[mode] = (json.loads(query.stdout), json.loads(stats.stdout), nx.read_graphml(target))
    (q_http, s_http, g_http), (q_local, s_local, g_local) = outputs["http"], outputs["local"]
    assert list(q_http) == list(q_local)
    assert q_http["status"] == q_local["status"] == "succeeded" and q_http["answer"]
    assert q_http["budget"]["total_allowed"] <= 3000 and q_http["mode"] == "naive"
    assert s_http == s_local
    assert sorted(g_http.nodes) == sorted(g_local.nodes) and g_http.number_of_edges() == g_local.number_of_edges()


def test_http_mode_takes_the_tenant_from_the_key(modes):
    env, _ = modes["http"]
    run = _cli(env, "stats", "--tenant", "someone-else", "--json")
    assert run.returncode != 0 and "does not match the API key's tenant" in run.stderr
    run = _cli({**env, "GRAPHFLEET_API_KEY": ""}, "stats", "--json")
    assert run.returncode != 0 and "GRAPHFLEET_API_KEY" in run.stderr
    run = _cli({**env, "GRAPHFLEET_API_KEY": "gfk_0000000000000000_" + "x" * 43}, "stats", "--json")
    assert run.returncode == 1 and "invalid_api_key" in run.stderr


def test_ingest_without_wait_prints_the_job(modes):
    env, _ = modes["http"]
    run = _cli(env, "ingest", str(modes["doc"]), "--json")
    assert run.returncode == 0, run.stderr
    body = json.loads(run.stdout)
    assert set(body) == {"job_id", "documents", "new_documents", "refused", "status"} and body["new_documents"] == 0
    assert body["refused"] == []
    assert modes["api"].wait_job(body["job_id"])["status"] == "succeeded"


def test_progress_line_shows_documents_chunks_and_tokens():
    view = {"status": "running", "progress": {"documents": 3, "documents_chunked": 2, "chunks_total": 40,
                                              "chunks_done": 9, "chunks_failed": 1, "stage": "extract"},
            "usage": {"calls": 25, "prompt_tokens": 41000, "completion_tokens": 9000}}
    text = progress_text(view)
    assert "25%" in text and "running:extract" in text and "docs 2/3" in text and "chunks 9/40" in text
    assert "failed 1" in text and "tokens 50,000" in text and "calls 25" in text
    stream = io.StringIO()
    line = ProgressLine(stream)
    line.update(view)
    line.close()
    assert stream.getvalue().startswith("\r[") and stream.getvalue().endswith("\n")
