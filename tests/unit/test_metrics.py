"""``shared.infra.observability.metrics``: LLM usage counters over processes (multiprocess mode), labels, helpers.

prometheus_client picks multiprocess mode when it is imported, so every multiprocess scenario runs in
fresh subprocesses with ``PROMETHEUS_MULTIPROC_DIR`` set; this process stays in single-process mode.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from shared.config import Settings, reset_settings_cache
from shared.domain.pricing import cost_usd
from shared.infra.observability.metrics import (
    METRIC_NAMES,
    OTHER_TENANT,
    prepare_multiproc_dir,
    tenant_allowlist,
    tenant_label,
)

ROOT = Path(__file__).resolve().parents[2]
MODELS = ["gpt-4o-mini", "gpt-4o", "text-embedding-3-small"]
STAGES = ["extract", "glean", "summarize", "report", "answer", "keywords", "map", "reduce"]

FEED = """
import json, sys
from shared.infra.observability.metrics import usage_listener
from shared.domain.models import UsageRecord
for raw in json.loads(sys.stdin.read()):
    usage_listener(UsageRecord(**raw))
"""

SCRAPE = """
import sys
from shared.infra.observability.metrics import metrics_response
body, ctype = metrics_response()
sys.stderr.write(ctype)
sys.stdout.write(body.decode())
"""


def make_records(seed: int, n: int) -> list[dict]:
    """Deterministic mix of chat calls, embeddings, cache hits, 429s and retried successes."""
    out = []
    for i in range(n):
        model = MODELS[(seed + i) % len(MODELS)]
        kind = "embedding" if model.startswith("text-embedding") else "chat"
        stage = "embed" if kind == "embedding" else STAGES[(seed * 7 + i) % len(STAGES)]
        rec = {"tenant": f"tenant{i % 3}", "job_id": f"job-{seed}", "stage": stage, "model": model, "kind": kind,
               "queue": "indexer" if kind == "embedding" else "extractor", "latency_s": 0.05 * (i % 9 + 1)}
        if i % 11 == 0:
            rec["cache_hit"], rec["latency_s"] = True, 0.0
        elif i % 13 == 0:
            rec.update(error="rate_limited", retries=i % 2)
        else:
            p = 100 + (seed * 31 + i * 17) % 900
            c = 0 if kind == "embedding" else 10 + (seed * 13 + i * 7) % 300
            rec.update(prompt_tokens=p, completion_tokens=c, cost_usd=cost_usd(model, p, c), retries=i % 4 == 0)
            rec["retries"] = int(rec["retries"])
        out.append(rec)
    return out


def run_py(code: str, env: dict, stdin: str = "") -> subprocess.CompletedProcess:
    proc = subprocess.run([sys.executable, "-c", code], input=stdin, capture_output=True, text=True,
                          env=env, cwd=ROOT, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return proc


def base_env(multiproc_dir: Path, **extra) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GRAPHFLEET_", "PROMETHEUS_"))}
    env["PROMETHEUS_MULTIPROC_DIR"] = str(multiproc_dir)
    env["PYTHONPATH"] = str(ROOT)
    env.update(extra)
    return env


def samples(text: str) -> dict[str, list]:
    """family name (exposition name of the samples) -> [(sample name, labels, value)]"""
    out: dict[str, list] = defaultdict(list)
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out[s.name].append((s.name, s.labels, s.value))
    return out


def feed_two_processes(mp_dir: Path, env: dict) -> list[dict]:
    records_a, records_b = make_records(1, 120), make_records(2, 150)
    procs = [
        subprocess.Popen([sys.executable, "-c", FEED], stdin=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         env=env, cwd=ROOT)
        for _ in range(2)
    ]
    for proc, recs in zip(procs, (records_a, records_b), strict=True):
        proc.stdin.write(json.dumps(recs))
        proc.stdin.close()
    for proc in procs:
        assert proc.wait(timeout=120) == 0, proc.stderr.read()
    # both writers exited: their files were folded into the archive at exit (no file per dead process)
    assert sorted(p.name for p in mp_dir.glob("*.db")) == ["counter_archive.db", "histogram_archive.db"]
    return records_a + records_b


def test_tokens_and_cost_sum_over_two_processes(tmp_path):
    mp_dir = prepare_multiproc_dir(tmp_path / "prom")
    env = base_env(mp_dir)
    records = feed_two_processes(mp_dir, env)
    scrape = run_py(SCRAPE, env)
    assert scrape.stderr.startswith("text/plain")
    got = samples(scrape.stdout)

    want_in = defaultdict(float)
    want_out = defaultdict(float)
    want_cost = defaultdict(float)
    for r in records:
        key = (r["model"], r["stage"])
        want_in[key] += r.get("prompt_tokens", 0)
        want_out[key] += r.get("completion_tokens", 0)
        want_cost[key] += cost_usd(r["model"], r.get("prompt_tokens", 0), r.get("completion_tokens", 0))

    tokens = got["graphfleet_llm_tokens_total"]
    assert tokens, "no graphfleet_llm_tokens_total series exported"
    for _n, labels, _v in tokens:
        assert set(labels) == {"direction", "model", "stage", "queue", "tier"}
        assert labels["tier"] == "standard"
        assert "tenant" not in labels
    got_in, got_out, got_cost = defaultdict(float), defaultdict(float), defaultdict(float)
    for _n, labels, v in tokens:
        target = got_in if labels["direction"] == "input" else got_out
        target[(labels["model"], labels["stage"])] += v
    for _n, labels, v in got["graphfleet_llm_cost_usd_total"]:
        got_cost[(labels["model"], labels["stage"])] += v

    assert sum(got_in.values()) == sum(r.get("prompt_tokens", 0) for r in records)
    assert sum(got_out.values()) == sum(r.get("completion_tokens", 0) for r in records)
    assert {k: v for k, v in got_in.items() if v} == {k: v for k, v in want_in.items() if v}
    assert {k: v for k, v in got_out.items() if v} == {k: v for k, v in want_out.items() if v}
    for key, cost in want_cost.items():
        assert got_cost.get(key, 0.0) == pytest.approx(cost, rel=1e-9, abs=1e-12)
    # embeddings are stage="embed", input tokens only
    assert all(k[1] == "embed" for k in want_in if k[0].startswith("text-embedding"))
    assert not any(k[0].startswith("text-embedding") for k, v in got_out.items() if v)

    def total(name, **match):
        return sum(v for _n, lab, v in got[name] if all(lab.get(k) == w for k, w in match.items()))

    assert total("graphfleet_llm_requests_total") == len(records)
    assert total("graphfleet_llm_cache_hits_total") == sum(1 for r in records if r.get("cache_hit"))
    assert total("graphfleet_llm_errors_total", error="rate_limited") == sum(
        1 for r in records if r.get("error") == "rate_limited")
    assert total("graphfleet_llm_retries_total") == sum(1 for r in records if r.get("retries"))
    assert total("graphfleet_llm_request_duration_seconds_count") == sum(
        1 for r in records if not r.get("cache_hit"))


def test_tenant_label_is_opt_in_and_bounded(tmp_path):
    mp_dir = prepare_multiproc_dir(tmp_path / "prom")
    env = base_env(mp_dir, GRAPHFLEET_METRICS_TENANT_ALLOWLIST="tenant0, tenant2")
    recs = make_records(3, 30)
    for r in recs[:5]:
        r["tier"] = "premium"  # future UsageRecord.tier; extra fields are ignored by the model today
    run_py(FEED, env, json.dumps(recs))
    got = samples(run_py(SCRAPE, env).stdout)
    tenants = {lab["tenant"] for _n, lab, _v in got["graphfleet_llm_requests_total"]}
    assert tenants == {"tenant0", "tenant2", OTHER_TENANT}
    assert sum(v for _n, _l, v in got["graphfleet_llm_tokens_total"]) == sum(
        r.get("prompt_tokens", 0) + r.get("completion_tokens", 0) for r in recs)


def test_prepare_multiproc_dir_wipes_stale_samples(tmp_path):
    d = tmp_path / "prom"
    d.mkdir()
    (d / "counter_123.db").write_bytes(b"stale")
    (d / "keep.txt").write_text("x")
    assert prepare_multiproc_dir(d) == d
    assert not list(d.glob("*.db")) and (d / "keep.txt").exists()
    assert prepare_multiproc_dir(tmp_path / "new" / "dir").is_dir()


def test_allowlist_helpers(monkeypatch):
    assert tenant_allowlist(Settings()) == frozenset()
    monkeypatch.setenv("GRAPHFLEET_METRICS_TENANT_ALLOWLIST", " a,b ,,c")  # comma-separated, a contract
    assert tenant_allowlist(Settings()) == {"a", "b", "c"}
    reset_settings_cache()
    assert tenant_allowlist() == {"a", "b", "c"}  # this process's settings
    assert tenant_label("a", frozenset({"a"})) == "a"
    assert tenant_label("zzz", frozenset({"a"})) == OTHER_TENANT


def test_metric_names_match_definitions(redis_client, monkeypatch):
    monkeypatch.delenv("GRAPHFLEET_BROKER_URL", raising=False)  # this Redis is the broker here
    from prometheus_client import CollectorRegistry, generate_latest

    from shared.infra.observability import metrics as mod
    from shared.infra.observability.metrics_collectors import QueueDepthCollector

    m = mod.metrics()
    exported = set()
    for attr in vars(m).values():
        if hasattr(attr, "_name"):
            exported.add(attr._name + ("_total" if attr._type == "counter" else ""))
    reg = CollectorRegistry()
    reg.register(QueueDepthCollector(redis_client, ["q"]))
    exported |= {f.name for f in text_string_to_metric_families(generate_latest(reg).decode())}
    assert exported == set(METRIC_NAMES)


def test_queue_depth_collector_reads_llen_at_scrape(redis_client, monkeypatch):
    monkeypatch.delenv("GRAPHFLEET_BROKER_URL", raising=False)  # this Redis is the broker here
    from shared.infra.observability.metrics import metrics_response

    redis_client.rpush("extractor", "m1", "m2", "m3")
    redis_client.rpush("merger", "m1")
    redis_client.hset("unacked", mapping={"tag1": "x"})
    try:
        body, _ctype = metrics_response(redis=redis_client, queues=["extractor", "merger", "chunker"])
    finally:
        redis_client.delete("extractor", "merger", "unacked")
    got = samples(body.decode())
    depth = {lab["queue"]: v for _n, lab, v in got["graphfleet_queue_depth"]}
    assert depth == {"extractor": 3.0, "merger": 1.0, "chunker": 0.0}
    assert got["graphfleet_queue_unacked"][0][2] == 1.0


HOLD = """
import sys, time
from shared.infra.observability.metrics import record_chunks
record_chunks(int(sys.argv[1]))
print("ready", flush=True)
time.sleep(600)
"""


def chunk_total(text: str) -> float:
    return sum(v for _n, _l, v in samples(text)["graphfleet_chunks_processed_total"])


def test_killed_process_is_folded_at_scrape_and_live_one_is_kept(tmp_path):
    """A SIGKILLed process runs no exit handler: the next scrape folds its file; a live one is untouched."""
    mp_dir = prepare_multiproc_dir(tmp_path / "prom")
    env = base_env(mp_dir)
    procs = []
    for n in (7, 5):
        proc = subprocess.Popen([sys.executable, "-c", HOLD, str(n)], stdout=subprocess.PIPE, text=True, env=env,
                                cwd=ROOT)
        assert proc.stdout.readline().strip() == "ready"
        procs.append(proc)
    killed, live = procs
    try:
        killed.kill()
        killed.wait(timeout=30)
        assert (mp_dir / f"counter_{killed.pid}.db").exists()
        assert chunk_total(run_py(SCRAPE, env).stdout) == 12
        assert not (mp_dir / f"counter_{killed.pid}.db").exists()
        assert (mp_dir / f"counter_{live.pid}.db").exists()
        assert chunk_total(run_py(SCRAPE, env).stdout) == 12  # folding is not double counting
    finally:
        live.kill()
        live.wait(timeout=30)
    assert chunk_total(run_py(SCRAPE, env).stdout) == 12
    assert sorted(p.name for p in mp_dir.glob("*.db")) == ["counter_archive.db"]


def test_many_short_lived_processes_leave_one_file_per_type(tmp_path):
    mp_dir = prepare_multiproc_dir(tmp_path / "prom")
    env = base_env(mp_dir)
    for i in range(6):
        code = "from shared.infra.observability.metrics import record_chunks; record_chunks(N)"
        run_py(code.replace("N", str(i + 1)), env)
    assert sorted(p.name for p in mp_dir.glob("*.db")) == ["counter_archive.db"]
    assert chunk_total(run_py(SCRAPE, env).stdout) == sum(range(1, 7))


def test_stage_label_is_bounded():
    from shared.infra.observability.metrics import STAGES, stage_label

    assert [stage_label(s) for s in STAGES] == list(STAGES)
    assert stage_label("rate") == "map" and stage_label("repair") == "answer"
    assert stage_label("made-up") == "other" and stage_label(None) == "other"


JOIN = """
import os, sys
import prometheus_client  # imported before the variable is set: single-process mode at import
from shared.infra.observability.metrics import join_multiproc_dir, record_job_submitted
assert "PROMETHEUS_MULTIPROC_DIR" not in os.environ
assert join_multiproc_dir(sys.argv[1])
record_job_submitted("ingest", "gold")
assert not join_multiproc_dir("/elsewhere")  # metrics are built: too late to move
"""


def test_a_process_can_join_the_host_directory_after_importing_prometheus_client(tmp_path):
    mp_dir = prepare_multiproc_dir(tmp_path / "prom")
    env = {k: v for k, v in base_env(mp_dir).items() if k != "PROMETHEUS_MULTIPROC_DIR"}
    proc = subprocess.run([sys.executable, "-c", JOIN, str(mp_dir)], capture_output=True, text=True, env=env,
                          cwd=ROOT, timeout=120)
    assert proc.returncode == 0, proc.stderr
    got = samples(run_py(SCRAPE, base_env(mp_dir)).stdout)
    assert [(lab, v) for _n, lab, v in got["graphfleet_jobs_total"]] == [
        ({"kind": "ingest", "status": "submitted", "tier": "gold"}, 1.0)]


PRIME_THEN_ANSWER = """
import json, sys
from shared.infra.observability import metrics as m
from shared.domain.models import UsageRecord
from shared.infra.messaging.queueing import QUERY, ROUTES
def scrape():
    from prometheus_client.parser import text_string_to_metric_families
    body, _ = m.metrics_response()
    return sorted((s.name, sorted(s.labels.items()), s.value) for f in text_string_to_metric_families(body.decode())
                  for s in f.samples if s.name.startswith(("graphfleet_llm", "graphfleet_job", "graphfleet_task")))
m.prime_query_series("gpt-4o-mini", ROUTES[QUERY], QUERY, {"acme": "gold", "beta": "free"})
primed = scrape()
# what a query worker's first answer writes: its task (its wait in the queue first), its answer call (usage), its job
m.observe_task_queue_wait(ROUTES[QUERY], QUERY, 0.002)
m.record_task(ROUTES[QUERY], QUERY, "started")
m.metrics().tasks_in_progress.labels(queue=ROUTES[QUERY], task=QUERY).inc()
m.usage_listener(UsageRecord(tenant="acme", job_id="q1", stage="answer", model="gpt-4o-mini", kind="chat",
                             queue=ROUTES[QUERY], tier="gold", prompt_tokens=900, completion_tokens=40,
                             cost_usd=0.001, latency_s=0.2))
m.record_job_finished("query", "succeeded", 0.3, "gold")
m.observe_task_duration(ROUTES[QUERY], QUERY, 0.3)
m.metrics().tasks_in_progress.labels(queue=ROUTES[QUERY], task=QUERY).dec()
m.record_task(ROUTES[QUERY], QUERY, "succeeded")
print(json.dumps({"primed": primed, "answered": scrape()}))
"""


@pytest.mark.parametrize("allowlist", ["", "acme"])
def test_primed_query_series_are_zero_and_exactly_those_a_first_answer_writes(tmp_path, allowlist):
    mp_dir = prepare_multiproc_dir(tmp_path / "prom")
    out = json.loads(run_py(PRIME_THEN_ANSWER, base_env(mp_dir, GRAPHFLEET_METRICS_TENANT_ALLOWLIST=allowlist)).stdout)
    primed = {(n, json.dumps(lab)): v for n, lab, v in out["primed"]}
    answered = {(n, json.dumps(lab)): v for n, lab, v in out["answered"]}
    assert primed and not any(primed.values())  # nothing counted or observed, only created
    assert set(answered) == set(primed)  # the first answer found every series it writes already there
    assert any(v for v in answered.values())
    requests = [dict(json.loads(lab)) for n, lab in primed if n == "graphfleet_llm_requests_total"]
    assert sorted((r["tier"], r["stage"], r["kind"]) for r in requests if r["model"] != "none") == [
        ("free", "answer", "chat"), ("gold", "answer", "chat")]
    tenants = {r.get("tenant") for r in requests if r["model"] != "none"}
    assert tenants == ({"acme", OTHER_TENANT} if allowlist else {None})


PRIME_THEN_SUBMIT = """
import json
from shared.infra.observability import metrics as m
def scrape():
    from prometheus_client.parser import text_string_to_metric_families
    body, _ = m.metrics_response()
    return sorted((s.name, sorted(s.labels.items()), s.value) for f in text_string_to_metric_families(body.decode())
                  for s in f.samples if s.name.startswith(("graphfleet_http", "graphfleet_jobs")))
m.prime_gateway_series([("/v1/queries", "POST"), ("/v1/jobs/{job_id}", "GET")], ["standard"])
primed = scrape()
# what a gateway's first query writes: the submission (its job, then its request), then a poll of the job
m.record_job_submitted("query", "standard")
m.record_http("/v1/queries", "POST", 202, 0.004)
m.record_http("/v1/jobs/{job_id}", "GET", 200, 0.002)
print(json.dumps({"primed": primed, "submitted": scrape()}))
"""


def test_primed_gateway_series_are_zero_and_exactly_those_a_first_submission_and_poll_write(tmp_path):
    """The gateway creates its hot routes' series at start-up (``api_gateway.app.HOT_ROUTES``): at zero, and the
    first query's submission and poll then write into those series and create no other."""
    out = json.loads(run_py(PRIME_THEN_SUBMIT, base_env(prepare_multiproc_dir(tmp_path / "prom"))).stdout)
    primed = {(n, json.dumps(lab)): v for n, lab, v in out["primed"]}
    submitted = {(n, json.dumps(lab)): v for n, lab, v in out["submitted"]}
    assert primed and not any(primed.values())  # nothing counted or observed, only created
    assert set(submitted) == set(primed)
    counted = {(dict(json.loads(lab)).get("route"), dict(json.loads(lab)).get("kind")) for (n, lab), v
               in submitted.items() if n in ("graphfleet_http_requests_total", "graphfleet_jobs_total") and v}
    assert counted == {("/v1/queries", None), ("/v1/jobs/{job_id}", None), (None, "query")}
