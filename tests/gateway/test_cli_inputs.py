"""What a new user hits on day one, as typed in a shell: a directory with an empty file among good ones, the local
CLI's errors (one ``graphfleet: CODE: message`` line, the documented exit code, never a traceback), ``--version``,
``--limit 0``, an unknown tenant, and a query on a tenant with no documents (refused by the gateway as by the
CLI, without an LLM call). Real stack: workers, the gateway, Redis; the LLM is the simulator."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from importlib.metadata import version

import pytest

from tests.conftest import ROOT
from tests.gateway.live import unique

pytestmark = pytest.mark.integration
GOOD = [f"Fezziwig's apprentice number {i} danced at the warehouse ball with Belle." for i in range(6)]


def _cli(env: dict, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "graphfleet_cli.main", *args], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=600)


def _one_error_line(run: subprocess.CompletedProcess, exit_code: int, start: str) -> str:
    """The run failed with ``exit_code`` and printed exactly one ``graphfleet: CODE: message`` line."""
    assert run.returncode == exit_code, (run.returncode, run.stdout, run.stderr)
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(start), run.stderr
    assert "Traceback" not in run.stderr and not run.stdout
    return lines[0]


@pytest.fixture(scope="module")
def envs(live, tmp_path_factory):
    base = {k: v for k, v in os.environ.items() if not k.startswith("GRAPHFLEET_")}
    base["GRAPHFLEET_DATA_DIR"] = str(tmp_path_factory.mktemp("cli-inputs"))
    api = live.new_tenant("inputs")
    return {"api": api, "none": base,
            "http": {**base, "GRAPHFLEET_URL": live.url, "GRAPHFLEET_API_KEY": api.key},
            "local": {**base, "GRAPHFLEET_REDIS_URL": live.stack.redis_url,
                      "GRAPHFLEET_BROKER_URL": live.stack.broker_url or ""}}


@pytest.fixture()
def batch_dir(tmp_path):
    """Six good .txt files and an empty one."""
    for i, text in enumerate(GOOD):
        (tmp_path / f"good-{i}.txt").write_text(text, encoding="utf-8")
    (tmp_path / "empty.txt").write_bytes(b"")
    return tmp_path


def _titles(env: dict, tenant_args: list[str]) -> list[str]:
    run = _cli(env, "documents", "list", *tenant_args, "--json")
    assert run.returncode == 0, run.stderr
    return sorted(d["title"] for d in json.loads(run.stdout)["items"])


@pytest.mark.parametrize("mode", ["local", "http"])
def test_ingest_of_a_directory_with_an_empty_file_ingests_the_rest_and_names_it(envs, live, batch_dir, mode):
    env, tenant = envs[mode], ["--tenant", unique("dir")] if mode == "local" else []
    run = _cli(env, "ingest", str(batch_dir), *tenant, "--wait", "--json")
    assert run.returncode == 0, run.stderr
    out = json.loads(run.stdout)  # --json: one JSON document on stdout
    assert out["status"] == "succeeded" and out["job_documents"] == 6
    assert [(r["name"], r["code"], r["cause"]) for r in out["refused"]] == [
        ("empty.txt", "empty_document", "empty.txt: text is empty")]
    err = run.stderr.splitlines()
    assert "graphfleet: refused: empty.txt: text is empty" in err
    assert f"job {out['job_id']} queued; waiting (graphfleet jobs show {out['job_id']} to look at it later)" in err
    job = _cli(env, "jobs", "show", out["job_id"], *tenant, "--json")
    assert [(f["name"], f["stage"]) for f in json.loads(job.stdout)["failures"]] == [("empty.txt", "validate")]
    assert _titles(env, tenant) == [f"good-{i}.txt" for i in range(6)]


@pytest.mark.parametrize("mode", ["local", "http"])
def test_ingest_atomic_refuses_the_batch_naming_the_file_and_ingests_nothing(envs, live, batch_dir, mode):
    env = envs[mode]
    tenant = unique("atomic") if mode == "local" else envs["api"].id
    before = live.job_count(tenant)
    run = _cli(env, "ingest", str(batch_dir), *(["--tenant", tenant] if mode == "local" else []), "--atomic",
               "--wait")
    line = _one_error_line(run, 1, "graphfleet: empty_document: empty.txt: text is empty")
    assert "document 0" not in line
    assert live.job_count(tenant) == before


def test_local_ingest_of_one_empty_file_is_one_error_line_not_a_traceback(envs, live, tmp_path):
    empty = tmp_path / "empty.txt"
    empty.write_bytes(b"")
    run = _cli(envs["local"], "ingest", str(empty), "--tenant", unique("empty"), "--wait")
    line = _one_error_line(run, 1, "graphfleet: empty_document: ")
    assert line == "graphfleet: empty_document: empty.txt: text is empty"


def test_local_cli_errors_are_one_line_with_the_documented_exit_code(envs, tmp_path):
    local, none = envs["local"], envs["none"]
    _one_error_line(_cli(local, "ingest", str(tmp_path / "missing.txt"), "--wait"), 3, "graphfleet: not_found: ")
    exe = tmp_path / "tool.txt"
    exe.write_bytes(b"MZ\x90\x00\x03\x00\x00\x00\x04\x00\x00\x00\xff\xff")
    _one_error_line(_cli(local, "ingest", str(exe), "--tenant", unique("exe")), 1,
                    "graphfleet: unsupported_file_type: tool.txt: not a text, PDF, HTML or DOCX file")
    (tmp_path / "ok.txt").write_text("Marley was dead.", encoding="utf-8")
    _one_error_line(_cli(none, "ingest", str(tmp_path / "ok.txt")), 1, "graphfleet: no_stack: no running stack")
    mismatch = _cli(envs["http"], "ingest", str(tmp_path / "ok.txt"), "--tenant", "someone-else")
    _one_error_line(mismatch, 2, "graphfleet: tenant_mismatch: --tenant someone-else does not match")
    _one_error_line(_cli(local, "jobs", "show", "job-nosuch", "--tenant", unique("t")), 3, "graphfleet: not_found:")


def test_version_help_limit_and_an_unknown_tenant(envs):
    local = envs["local"]
    shown = _cli(local, "--version")
    assert shown.returncode == 0 and shown.stdout.strip() == f"graphfleet {version('graphfleet')}"
    helped = _cli(local, "--help")
    assert ".txt/.md files" not in helped.stdout and "PDF, HTML and DOCX" in helped.stdout
    _one_error_line(_cli(local, "jobs", "list", "--limit", "0"), 2, "graphfleet: usage: graphfleet jobs list: ")
    _one_error_line(_cli(local, "documents", "list", "--tenant", unique("nosuchtenant")), 3, "graphfleet: not_found:")


def test_a_query_on_a_tenant_with_no_documents_is_refused_without_an_llm_call(live, envs):
    api = live.new_tenant("blank")
    calls = live.sim_stats()["chat"]["calls"]
    r = api.post("/v1/queries", json={"mode": "local", "query": "Who is Scrooge?"}, params={"wait": 30})
    assert r.status_code == 404, r.text
    assert r.json()["error"]["code"] == "no_documents"
    assert live.job_count(api.id) == 0  # no query job, so nothing for a worker to run
    usage = api.get("/v1/usage").json()
    assert usage["totals"]["calls"] == 0 and usage["totals"]["prompt_tokens"] == 0
    assert live.sim_stats()["chat"]["calls"] == calls
    streamed = api.post("/v1/queries", json={"query": "Who is Scrooge?", "stream": True})
    assert streamed.status_code == 404 and streamed.json()["error"]["code"] == "no_documents"
    cli = _cli({**envs["none"], "GRAPHFLEET_URL": live.url, "GRAPHFLEET_API_KEY": api.key}, "query", "Who?")
    _one_error_line(cli, 3, f"graphfleet: no_documents: no documents ingested for tenant '{api.id}'")
