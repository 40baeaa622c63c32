"""What a newcomer sees first: ``graphfleet --help`` lists every verb, ``graphfleet up`` prints the live URLs
(gateway, /docs, /metrics) and where its data is, ``graphfleet demo`` says what it is doing and where its data
stays. Each runs as a subprocess, as typed in a shell."""

from __future__ import annotations

import json
import re
import subprocess

import httpx

from graphfleet_cli.main import build_parser
from shared.infra.redis.conn import free_port
from tests.integration.cli_proc import BIN, ROOT, UpProcess, cli_env


def _verbs() -> list[str]:
    sub = next(a for a in build_parser()._actions if a.dest == "command")
    return list(sub.choices)


def test_help_lists_every_verb_and_the_readme_documents_each(tmp_path):
    out = subprocess.run([str(BIN / "graphfleet"), "--help"], env=cli_env(tmp_path), capture_output=True,
                         text=True, check=True).stdout
    readme = (ROOT / "README.md").read_text()
    verbs = _verbs()
    assert {"up", "ingest", "query", "stats", "export", "demo", "backup", "restore", "llm-simulator"} <= set(verbs)
    for verb in verbs:
        assert re.search(rf"^\s+{re.escape(verb)}\s+\S", out, re.M), f"{verb} has no help line:\n{out}"
        assert f"| `graphfleet {verb}" in readme, f"README's command table lacks graphfleet {verb}"


def test_up_prints_live_urls_and_where_the_data_is(tmp_path):
    data = tmp_path / "data"
    with UpProcess(["--port", str(free_port())], cli_env(data)) as up:
        up.wait_for("Ctrl-C to stop")
        gateway = up.field("gateway")
        docs, metrics = up.field("API docs").split()[0], up.field("metrics")
        assert docs == f"{gateway}/docs" and metrics == f"{gateway}/metrics"
        assert up.field("data dir") == str(data) and up.field("logs") == str(data / "logs")
        assert f"data in {data / 'redis'}" in up.field("redis")
        assert up.field("admin key").startswith("adm-")
        assert not any("docs/api.md" in line for line in up.lines)
        page = httpx.get(docs, timeout=30)
        assert page.status_code == 200 and "swagger-ui" in page.text
        scrape = httpx.get(metrics, timeout=30)
        assert scrape.status_code == 200 and "# TYPE graphfleet_" in scrape.text
        assert httpx.get(f"{gateway}/healthz", timeout=30).status_code == 200
        assert up.stop() == 0
    assert up.lines[-1] == f"stopped; data kept in {data}", up.lines
    assert (data / "redis").is_dir()


def test_demo_says_what_it_does_and_where_its_data_stays(tmp_path):
    data = tmp_path / "data"
    done = subprocess.run([str(BIN / "graphfleet"), "demo", "--json"], env=cli_env(data), cwd=tmp_path,
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr
    progress = [line.removeprefix("graphfleet demo: ") for line in done.stderr.splitlines()
                if line.startswith("graphfleet demo: ")]
    expected = [f"data directory: {data / 'demo'}", "starting the stack", "stack up:", "ingesting christmas_carol.txt",
                "ingestion succeeded", "querying", "stopping the stack", f"stopped; data kept in {data / 'demo'}"]
    found = iter(progress)
    for prefix in expected:  # in this order
        assert any(line.startswith(prefix) for line in found), (prefix, progress)
    results = [json.loads(line) for line in done.stdout.splitlines()]  # --json: one object a line, nothing else
    assert results[0]["status"] == "succeeded" and results[0]["entities"] > 0
    assert [r["mode"] for r in results[1:]] == ["local", "global", "naive", "hybrid", "causal"]
    assert (data / "demo" / "redis").is_dir() and (data / "demo" / "logs").is_dir()
