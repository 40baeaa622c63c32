"""Grafana dashboards (deploy/grafana/dashboards) and alert rules (deploy/prometheus/alerts.yml).

Structure always (Grafana dashboard model: required keys, unique panel ids, gridPos inside 24 columns and
not overlapping, datasource references, variables); PromQL syntax and alert behaviour with promtool when
installed (Debian: apt-get install -y prometheus). deploy/check_dashboards.py runs the same expressions
against a real Prometheus that scraped a real run.
"""

from __future__ import annotations

import json
import re
import runpy
import shutil
import subprocess
from pathlib import Path

import pytest

from shared.infra.observability.metrics import METRIC_NAMES

ROOT = Path(__file__).resolve().parents[2]
DASHBOARDS = ROOT / "deploy" / "grafana" / "dashboards"
ALERTS = ROOT / "deploy" / "prometheus" / "alerts.yml"
ALERT_TESTS = ROOT / "deploy" / "prometheus" / "alerts_test.yml"
RECORDING = ROOT / "deploy" / "prometheus" / "recording.yml"
# redis_exporter families the Redis row and the Redis alerts may use (oliver006/redis_exporter names)
REDIS_NAMES = {"redis_up", "redis_memory_used_bytes", "redis_memory_max_bytes", "redis_evicted_keys_total",
               "redis_rejected_connections_total", "redis_errors_total", "redis_aof_last_write_status",
               "redis_aof_last_bgrewrite_status", "redis_aof_rewrite_in_progress", "redis_connected_clients"}
# counters of events that may not happen for days: their panels must show 0, not "no data"
RARE = ("graphfleet_job_resumes_total", "graphfleet_llm_errors_total", "graphfleet_llm_retries_total",
        'graphfleet_http_requests_total{status="5xx"', 'graphfleet_chunks_processed_total{outcome="failed"',
        "redis_evicted_keys_total", "redis_rejected_connections_total", "redis_errors_total")
BUILTINS = {"__rate_interval", "__interval", "__range", "__interval_ms", "__range_s"}
REQUIRED = {"uid", "title", "panels", "schemaVersion", "templating", "time", "annotations", "editable", "version"}


def dashboards() -> dict[str, dict]:
    return {p.name: json.loads(p.read_text()) for p in sorted(DASHBOARDS.glob("*.json"))}


def targets(dash: dict):
    for panel in dash["panels"]:
        for target in panel.get("targets", []):
            yield panel, target


def recording_rules() -> dict[str, str]:
    """record name -> expression, from deploy/prometheus/recording.yml."""
    return dict(re.findall(r"^\s*- record: (\S+)\n\s*expr: (.+)$", RECORDING.read_text(), flags=re.M))


def metric_refs(expr: str) -> set[str]:
    """graphfleet families an expression reads, directly or through a recorded series."""
    rules = recording_rules()
    for name in set(re.findall(r"\b(graphfleet:[a-z0-9_:]+)", expr)):
        assert name in rules, f"{name} is not recorded by {RECORDING.name}"
        expr += " " + rules[name]
    names = set(re.findall(r"\b(graphfleet_[a-z0-9_]+)\b", expr))
    return {n if n in METRIC_NAMES else re.sub(r"_(bucket|count|sum)$", "", n) for n in names}


def test_expected_dashboards_exist_and_match_their_source():
    built = runpy.run_path(str(ROOT / "deploy" / "grafana" / "build_dashboards.py"))["build"]()
    got = dashboards()
    assert set(got) == {"graphfleet-overview.json", "graphfleet-tier.json"}
    for name, dash in built.items():
        assert got[name] == json.loads(json.dumps(dash)), f"{name} is stale: run deploy/grafana/build_dashboards.py"


@pytest.mark.parametrize("name", ["graphfleet-overview.json", "graphfleet-tier.json"])
def test_dashboard_model(name):
    dash = dashboards()[name]
    assert set(dash) >= REQUIRED, REQUIRED - set(dash)
    assert dash["uid"] == name.removesuffix(".json") and len(dash["uid"]) <= 40
    assert isinstance(dash["schemaVersion"], int) and dash["schemaVersion"] >= 36
    ids = [p["id"] for p in dash["panels"]]
    assert len(ids) == len(set(ids)) and all(isinstance(i, int) for i in ids)
    cells: set[tuple[int, int]] = set()
    for p in dash["panels"]:
        assert p["type"] in {"timeseries", "stat", "row", "heatmap", "gauge", "table", "bargauge"}, p["type"]
        assert p["title"]
        g = p["gridPos"]
        assert set(g) == {"h", "w", "x", "y"} and all(isinstance(v, int) and v >= 0 for v in g.values())
        assert g["w"] >= 1 and g["h"] >= 1 and g["x"] + g["w"] <= 24, p["title"]
        mine = {(x, y) for x in range(g["x"], g["x"] + g["w"]) for y in range(g["y"], g["y"] + g["h"])}
        assert not cells & mine, f"panel {p['id']} overlaps another"
        cells |= mine
        if p["type"] != "row":
            assert p["targets"], p["title"]
            assert "defaults" in p["fieldConfig"]


@pytest.mark.parametrize("name", ["graphfleet-overview.json", "graphfleet-tier.json"])
def test_datasources_and_variables(name):
    dash = dashboards()[name]
    variables = {v["name"]: v for v in dash["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource" and variables["datasource"]["query"] == "prometheus"
    ds_ref = {"type": "prometheus", "uid": "${datasource}"}
    for v in variables.values():
        assert set(v) >= {"name", "type", "hide"}
        if v["type"] == "query":
            assert v["datasource"] == ds_ref
            assert metric_refs(v["definition"]) <= METRIC_NAMES
    for panel, target in targets(dash):
        assert panel["datasource"] == ds_ref and target["datasource"] == ds_ref
        assert re.fullmatch(r"[A-Z]", target["refId"])
        used = set(re.findall(r"\$(\w+)", target["expr"])) | set(re.findall(r"\$(\w+)", panel["title"]))
        assert used <= set(variables) | BUILTINS, used - set(variables) - BUILTINS
    refs = [t["refId"] for p in dash["panels"] for t in p.get("targets", [])]
    assert refs  # every panel's refIds are unique within the panel
    for panel in dash["panels"]:
        ids = [t["refId"] for t in panel.get("targets", [])]
        assert len(ids) == len(set(ids))


def test_every_expression_uses_only_exported_metric_names():
    seen = set()
    for name, dash in dashboards().items():
        for panel, target in targets(dash):
            refs = metric_refs(target["expr"])
            redis = set(re.findall(r"\b(redis_[a-z0-9_]+)\b", target["expr"]))
            assert refs or redis, f"{name}: {panel['title']} uses no graphfleet or redis_exporter metric"
            assert refs <= METRIC_NAMES, f"{name}: {panel['title']}: unknown {refs - METRIC_NAMES}"
            assert redis <= REDIS_NAMES, f"{name}: {panel['title']}: unknown {redis - REDIS_NAMES}"
            seen |= refs
    # the dashboards show every family we export
    assert seen == set(METRIC_NAMES), set(METRIC_NAMES) - seen


def test_overview_has_the_required_panels():
    titles = " | ".join(p["title"].lower() for p in dashboards()["graphfleet-overview.json"]["panels"])
    for needle in ("spend ($/h)", "tokens/min by model and stage", "p50/p95/p99", "errors", "429", "queue depth",
                   "task latency", "jobs/min", "end-to-end job latency", "cache hit rate"):
        assert needle in titles, needle
    tier = dashboards()["graphfleet-tier.json"]
    assert {"tier", "model", "stage", "kind"} <= {v["name"] for v in tier["templating"]["list"]}


def test_alert_rule_names_and_metrics():
    text = ALERTS.read_text()
    names = re.findall(r"^\s*- alert: (\w+)", text, flags=re.M)
    assert {"GraphfleetQueueBacklogGrowing", "GraphfleetLLMRateLimitStorm", "GraphfleetTaskFailureRatioHigh",
            "GraphfleetWorkerDown", "GraphfleetLLMSpendAboveBudget", "GraphfleetQueueNotConsumed",
            "GraphfleetQueueHasNoConsumer", "GraphfleetQueueMetricsAbsent", "GraphfleetRedisDown",
            "GraphfleetRedisMemoryHigh", "GraphfleetRedisAOFWriteFailing", "GraphfleetHTTPErrorRatioHigh"} <= set(names)
    assert len(names) == len(set(names))
    assert metric_refs(text) <= METRIC_NAMES
    assert set(re.findall(r"\b(redis_[a-z0-9_]+)\b", text)) - {"redis_exporter"} <= REDIS_NAMES


def test_dashboards_use_the_recording_rules():
    """The heavy aggregations come from recording.yml; every recorded series is shown somewhere."""
    used = {n for dash in dashboards().values() for _p, t in targets(dash)
            for n in re.findall(r"\b(graphfleet:[a-z0-9_:]+)", t["expr"])}
    assert used == set(recording_rules())


def rare_event_targets() -> list[tuple[str, str]]:
    out = []
    for dash in dashboards().values():
        for panel, target in targets(dash):
            if any(r in target["expr"] for r in RARE):
                out.append((panel["title"], target["expr"]))
    return out


def test_rare_event_panels_declare_zero():
    found = rare_event_targets()
    assert len(found) >= 8, found
    for title, expr in found:
        assert expr.rstrip().endswith("or vector(0)"), f"{title}: {expr} shows no data instead of 0"


promtool = pytest.mark.skipif(not shutil.which("promtool"),
                              reason="promtool not installed (Debian: apt-get install -y prometheus)")


@promtool
def test_promtool_check_rules():
    for path in (ALERTS, RECORDING):
        proc = subprocess.run(["promtool", "check", "rules", str(path)], capture_output=True, text=True, timeout=60)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert "SUCCESS" in proc.stdout


def substitute(expr: str) -> str:
    subst = {"$__rate_interval": "1m", "$tier": "gold", "$model": ".*", "$stage": ".*", "$kind": ".*"}
    for k, v in sorted(subst.items(), key=lambda kv: -len(kv[0])):
        expr = expr.replace(k, v)
    return expr


@promtool
def test_rare_event_panels_show_zero_on_an_empty_fleet(tmp_path):
    """Each rare-event panel target, evaluated by Prometheus's engine over a TSDB where no such event was
    ever counted (only an unrelated series), returns exactly one sample: 0."""
    tests = []
    for title, expr in rare_event_targets():
        tests.append({"expr": substitute(expr), "eval_time": "5m", "exp_samples": [{"labels": "{}", "value": 0}],
                      "_title": title})
    spec = {"evaluation_interval": "1m", "tests": [{
        "interval": "1m",
        "input_series": [{"series": 'up{job="prometheus"}', "values": "1x10"}],
        "promql_expr_test": [{k: v for k, v in t.items() if k != "_title"} for t in tests]}]}
    path = tmp_path / "rare_test.yml"
    path.write_text(json.dumps(spec))  # JSON is YAML
    proc = subprocess.run(["promtool", "test", "rules", str(path)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr


@promtool
def test_promtool_alert_unit_tests():
    """deploy/prometheus/alerts_test.yml: synthetic series that must (and must not) fire each alert."""
    proc = subprocess.run(["promtool", "test", "rules", str(ALERT_TESTS)], capture_output=True, text=True,
                          timeout=120, cwd=ALERT_TESTS.parent)
    assert proc.returncode == 0, proc.stdout + proc.stderr


@promtool
def test_dashboard_expressions_parse(tmp_path):
    """Every panel expression (variables substituted as Grafana would) is valid PromQL: promtool parses it
    as a recording rule."""
    subst = {"$__rate_interval": "1m", "$tier": "gold", "$model": ".*", "$stage": ".*", "$kind": ".*"}
    lines = ["groups:", "  - name: dashboards", "    rules:"]
    n = 0
    for dash in dashboards().values():
        for _panel, target in targets(dash):
            expr = target["expr"]
            for k, v in sorted(subst.items(), key=lambda kv: -len(kv[0])):
                expr = expr.replace(k, v)
            n += 1
            lines += [f"      - record: dashboard:expr{n}", f"        expr: {json.dumps(expr)}"]
    rules = tmp_path / "dash.yml"
    rules.write_text("\n".join(lines) + "\n")
    proc = subprocess.run(["promtool", "check", "rules", str(rules)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"SUCCESS: {n} rules found" in proc.stdout


def test_the_checks_png_names_series_as_grafana_does():
    """deploy/check_dashboards.py's PNG: a ``{{label}}`` the series lacks (a zero line: ``or vector(0)``) renders as
    nothing, as in Grafana, not as the template."""
    legend = runpy.run_path(str(ROOT / "deploy" / "check_dashboards.py"))["legend"]
    assert legend("{{error}}", {"error": "timeout"}) == "timeout"
    assert legend("{{ queue }} p95", {"queue": "query"}) == "query p95"
    assert legend("errors {{error}}", {}) == "errors"
    assert legend("{{error}}", {}) == "{}"
    assert legend("", {"job": "x"}) == '{"job": "x"}'
