"""Write the provisioned Grafana dashboards (deploy/grafana/dashboards/*.json) from the panel lists below.

    .venv/bin/python deploy/grafana/build_dashboards.py

The JSON files are the deployed artefacts (Grafana provisioning reads them); this script is their
source, and tests/unit/test_dashboards.py fails when the two differ. Every expression may use only
metric names from ``shared.infra.observability.metrics.METRIC_NAMES``, the recorded series of
deploy/prometheus/recording.yml (``graphfleet:...:rate5m``, the heavy aggregations) and, in the Redis row,
redis_exporter's ``redis_*``; deploy/check_dashboards.py runs each of them against a real Prometheus that
scraped a real run. Counters of rare events (errors, retries, resumed jobs, 5xx) end in ``or vector(0)``, so
their panels show 0, not "no data", when nothing happened (tests/unit/test_dashboards.py checks it).
Grafana variables used: ``$datasource``, ``$tier``,
``$model``, ``$stage``, ``$queue``, ``$kind``, ``$__rate_interval``.
"""

from __future__ import annotations

import json
from pathlib import Path

OUT = Path(__file__).resolve().parent / "dashboards"
# shared.infra.observability.metrics.PLACEHOLDER: the label value of a family's zero sample, not a real value
PLACEHOLDER = "none"
DS = {"type": "prometheus", "uid": "${datasource}"}
RI = "$__rate_interval"


def q(expr: str, legend: str = "") -> dict:
    return {"expr": expr, "legendFormat": legend}


def panel(title: str, targets: list[dict], unit: str = "short", kind: str = "timeseries", w: int = 12, h: int = 8,
          description: str = "", stack: bool = False) -> dict:
    p = {"type": kind, "title": title, "description": description, "datasource": DS, "w": w, "h": h,
         "targets": targets, "fieldConfig": {"defaults": {"unit": unit}, "overrides": []}}
    if kind == "timeseries":
        p["fieldConfig"]["defaults"]["custom"] = {"drawStyle": "line", "lineWidth": 1, "fillOpacity": 10,
                                                  "stacking": {"mode": "normal" if stack else "none", "group": "A"}}
        p["options"] = {"legend": {"displayMode": "table", "placement": "bottom", "calcs": ["lastNotNull", "max"]},
                        "tooltip": {"mode": "multi", "sort": "desc"}}
    elif kind == "stat":
        p["options"] = {"reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False},
                        "colorMode": "value", "graphMode": "area", "textMode": "auto"}
    return p


def row(title: str) -> dict:
    return {"type": "row", "title": title, "collapsed": False, "w": 24, "h": 1}


def quantiles(recorded: str, by: str, selector: str = "", legend: str = "") -> list[dict]:
    """p50/p95/p99 from a recorded ``sum by (..., le) (rate(<histogram>_bucket[5m]))`` series."""
    sel = f"{{{selector}}}" if selector else ""
    return [q(f"histogram_quantile({p}, sum by ({by}le) ({recorded}{sel}))", f"p{int(p * 100)}{legend}")
            for p in (0.5, 0.95, 0.99)]


def zero(expr: str) -> str:
    """A rare-event expression that shows 0 instead of "no data" when no such event was ever counted."""
    return f"({expr}) or vector(0)"


COST, TOKENS = "graphfleet:llm_cost_usd:rate5m", "graphfleet:llm_tokens:rate5m"
LLM_LAT = "graphfleet:llm_request_duration_seconds_bucket:rate5m"
TASK_LAT = "graphfleet:task_duration_seconds_bucket:rate5m"
QUEUE_WAIT = "graphfleet:task_queue_wait_seconds_bucket:rate5m"
JOB_LAT = "graphfleet:job_duration_seconds_bucket:rate5m"
HTTP, HTTP_LAT = "graphfleet:http_requests:rate5m", "graphfleet:http_request_duration_seconds_bucket:rate5m"


# ------------------------------------------------------------------------------ overview
LLM_SEL = 'model=~"$model", stage=~"$stage"'
OVERVIEW = [
    row("LLM spend and tokens"),
    panel("LLM spend ($/h)", [q(f"sum({COST}) * 3600", "total")],
          unit="currencyUSD", kind="stat", w=6,
          description="Chat and embedding calls, priced by shared/domain/pricing.py"),
    panel("LLM spend by model and stage ($/h)",
          [q(f"sum by (model, stage) ({COST}{{{LLM_SEL}}}) * 3600", "{{model}} {{stage}}")],
          unit="currencyUSD", w=18, stack=True),
    panel("Tokens/min by model and stage",
          [q(f"sum by (model, stage, direction) ({TOKENS}{{{LLM_SEL}}}) * 60", "{{model}} {{stage}} {{direction}}")],
          w=24, stack=True),
    row("LLM latency, errors, cache"),
    panel("LLM latency p50/p95/p99", quantiles(LLM_LAT, "", LLM_SEL), unit="s",
          description="Per attempt, cache hits excluded"),
    panel("LLM latency p95 by model and stage",
          [q(f"histogram_quantile(0.95, sum by (model, stage, le) ({LLM_LAT}{{{LLM_SEL}}}))", "{{model}} {{stage}}")],
          unit="s"),
    panel("LLM errors/s by cause", [
        q(zero(f"sum by (error) (rate(graphfleet_llm_errors_total{{{LLM_SEL}}}[{RI}]))"), "{{error}}"),
        q(zero(f"sum(rate(graphfleet_llm_retries_total{{{LLM_SEL}}}[{RI}]))"), "retries"),
    ], unit="reqps", w=8),
    panel("429 rate (per s and share of attempts)", [
        q(zero(f'sum(rate(graphfleet_llm_errors_total{{error="rate_limited"}}[{RI}]))'), "429/s"),
        q(zero(f'sum(rate(graphfleet_llm_errors_total{{error="rate_limited"}}[{RI}])) / '
               f"sum(rate(graphfleet_llm_request_duration_seconds_count[{RI}]))"), "429 share of attempts"),
    ], unit="short", w=8),
    panel("LLM cache hit rate", [
        q(f"sum(rate(graphfleet_llm_cache_hits_total[{RI}])) / "
          f'sum(rate(graphfleet_llm_requests_total{{kind="chat"}}[{RI}]))', "hit rate"),
    ], unit="percentunit", w=8),
    row("Queues and tasks (per worker type)"),
    panel("Queue depth", [q("max by (queue) (graphfleet_queue_depth)", "{{queue}}"),
                          q("max(graphfleet_queue_unacked)", "unacked (all queues)")], w=8),
    panel("Consumers per queue (live workers)", [q("max by (queue) (graphfleet_queue_consumers)", "{{queue}}")], w=8,
          description="Workers whose heartbeat (workers/heartbeat.py) is under 30 s old; 0 = nobody consumes the "
                      "queue (alert GraphfleetQueueHasNoConsumer)"),
    panel("Tasks in progress", [q("sum by (queue) (graphfleet_tasks_in_progress)", "{{queue}}")], w=8, stack=True),
    panel("Task latency p95 by queue",
          [q(f"histogram_quantile(0.95, sum by (queue, le) ({TASK_LAT}))", "{{queue}}")], unit="s"),
    panel("Queue wait p95 by queue",
          [q(f"histogram_quantile(0.95, sum by (queue, le) ({QUEUE_WAIT}))", "{{queue}}")], unit="s",
          description="From a message being ready (sent, or its countdown over) to its task's start (the backlog "
                      "ahead of it and the delivery): a wait that grows while the tasks' own latency does not says "
                      "the queue needs more workers"),
    panel("Tasks/s by queue and outcome",
          [q(f"sum by (queue, outcome) (rate(graphfleet_tasks_total[{RI}]))", "{{queue}} {{outcome}}")],
          unit="ops"),
    panel("Task failure ratio by queue",
          [q(f'(sum by (queue) (rate(graphfleet_tasks_total{{outcome="failed"}}[{RI}])) '
             f'or 0 * sum by (queue) (rate(graphfleet_tasks_total{{outcome="started"}}[{RI}]))) / '
             f'sum by (queue) (rate(graphfleet_tasks_total{{outcome="started"}}[{RI}]))', "{{queue}}")],
          unit="percentunit", w=12),
    panel("Chunks extracted/min", [
        q(f"sum by (outcome) (rate(graphfleet_chunks_processed_total[{RI}])) * 60", "{{outcome}}"),
        q(zero(f'sum(rate(graphfleet_chunks_processed_total{{outcome="failed"}}[{RI}])) * 60'), "failed"),
    ], w=6),
    panel("Stalled jobs resumed (lost messages)/h",
          [q(zero(f"sum by (kind, stage) (rate(graphfleet_job_resumes_total[{RI}])) * 3600"), "{{kind}} {{stage}}")],
          w=6),
    row("Jobs"),
    panel("Jobs/min by kind and status",
          [q(f"sum by (kind, status) (rate(graphfleet_jobs_total[{RI}])) * 60", "{{kind}} {{status}}")], w=8),
    panel("End-to-end job latency (submit to done)", [
        q(f'histogram_quantile(0.5, sum by (kind, le) ({JOB_LAT}{{status="succeeded"}}))', "p50 {{kind}}"),
        q(f'histogram_quantile(0.95, sum by (kind, le) ({JOB_LAT}{{status="succeeded"}}))', "p95 {{kind}}"),
    ], unit="s", w=8),
    panel("Query caches warmed after index updates", [
        q(f"sum by (queue) (rate(graphfleet_query_cache_warmup_seconds_count[{RI}])) * 60", "warm-ups/min {{queue}}"),
        q("histogram_quantile(0.95, sum by (le) (rate("
          f"graphfleet_query_cache_warmup_seconds_bucket[{RI}])))", "p95 seconds"),
    ], w=8, description="Query workers rebuild a tenant's BM25 indexes, neighbour lists and parsed reports when "
                        "its ingestion updates the index, so the first query after it is not cold"),
    row("Gateway HTTP"),
    panel("Requests/s by route and status", [q(f"sum by (route, status) ({HTTP})", "{{route}} {{status}}")],
          unit="reqps", w=8, description="Route templates (ids are never labels); unmatched = no route"),
    panel("Request latency p95 by route",
          [q(f"histogram_quantile(0.95, sum by (route, le) ({HTTP_LAT}))", "{{route}}")], unit="s", w=8),
    panel("5xx share of requests", [
        q(zero(f'sum(rate(graphfleet_http_requests_total{{status="5xx"}}[{RI}])) / '
               f"sum(rate(graphfleet_http_requests_total[{RI}]))"), "5xx share"),
        q(zero(f'sum(rate(graphfleet_http_requests_total{{status="5xx"}}[{RI}]))'), "5xx/s"),
    ], unit="short", w=8),
    row("Redis (redis_exporter)"),
    panel("Redis memory used vs maxmemory", [
        q("max(redis_memory_used_bytes)", "used"),
        q("max(redis_memory_max_bytes)", "maxmemory"),
    ], unit="bytes", w=8, description="maxmemory-policy noeviction: at maxmemory every write fails"),
    panel("Redis evictions, rejected connections and writes/min", [
        q(zero(f"sum(rate(redis_evicted_keys_total[{RI}])) * 60"), "evicted keys"),
        q(zero(f"sum(rate(redis_rejected_connections_total[{RI}])) * 60"), "rejected connections"),
        q(zero(f'sum(rate(redis_errors_total{{err="OOM"}}[{RI}])) * 60'), "writes rejected (OOM)"),
    ], w=8),
    panel("Redis AOF and clients", [
        q("max(redis_aof_last_write_status)", "AOF last write ok (1)"),
        q("max(redis_aof_last_bgrewrite_status)", "AOF last rewrite ok (1)"),
        q("max(redis_aof_rewrite_in_progress)", "AOF rewrite in progress"),
        q("max(redis_connected_clients)", "connected clients"),
        q("max(redis_up)", "up"),
    ], w=8),
]

# ------------------------------------------------------------------------------ per tier
TIER_SEL = 'tier=~"$tier"'
TIER_LLM = 'tier=~"$tier", model=~"$model", stage=~"$stage"'
TIER = [
    row("Tier $tier: spend"),
    panel("Spend ($/h)", [q(f"sum({COST}{{{TIER_LLM}}}) * 3600", "$tier")],
          unit="currencyUSD", kind="stat", w=6),
    panel("Spend by stage ($/h)",
          [q(f"sum by (stage) ({COST}{{{TIER_LLM}}}) * 3600", "{{stage}}")],
          unit="currencyUSD", w=9, stack=True),
    panel("Average LLM cost per finished job ($)",
          [q(f"sum(rate(graphfleet_llm_cost_usd_total{{{TIER_SEL}}}[{RI}])) / "
             f'sum(rate(graphfleet_jobs_total{{{TIER_SEL}, status!="submitted"}}[{RI}]))', "$/job")],
          unit="currencyUSD", w=9),
    panel("Tokens/min by stage and direction",
          [q(f"sum by (stage, direction) ({TOKENS}{{{TIER_LLM}}}) * 60", "{{stage}} {{direction}}")], w=12,
          stack=True),
    panel("LLM calls/s by model and queue",
          [q(f"sum by (model, queue) (rate(graphfleet_llm_requests_total{{{TIER_LLM}}}[{RI}]))",
             "{{model}} {{queue}}")], unit="reqps", w=12),
    panel("Cache hit rate",
          [q(f"sum(rate(graphfleet_llm_cache_hits_total{{{TIER_LLM}}}[{RI}])) / "
             f'sum(rate(graphfleet_llm_requests_total{{{TIER_LLM}, kind="chat"}}[{RI}]))', "hit rate")],
          unit="percentunit", w=12),
    panel("Jobs/min by kind and status",
          [q(f'sum by (kind, status) (rate(graphfleet_jobs_total{{{TIER_SEL}, kind=~"$kind"}}[{RI}])) * 60',
             "{{kind}} {{status}}")], w=12),
    row("Tier $tier: latency"),
    panel("Job latency p50/p95 (submit to done)", [
        q(f'histogram_quantile(0.5, sum by (kind, le) ({JOB_LAT}{{{TIER_SEL}, kind=~"$kind"}}))', "p50 {{kind}}"),
        q(f'histogram_quantile(0.95, sum by (kind, le) ({JOB_LAT}{{{TIER_SEL}, kind=~"$kind"}}))', "p95 {{kind}}"),
    ], unit="s", w=12),
    panel("Job latency heatmap",
          [{"expr": f'sum by (le) (increase(graphfleet_job_duration_seconds_bucket{{{TIER_SEL}, kind=~"$kind"}}'
                    f"[{RI}]))", "legendFormat": "{{le}}", "format": "heatmap"}], kind="heatmap", w=12),
]


def _variables(tier_vars: bool) -> list[dict]:
    out = [{"name": "datasource", "label": "Prometheus", "type": "datasource", "query": "prometheus",
            "current": {}, "hide": 0, "refresh": 1, "options": [], "regex": "", "skipUrlSync": False}]

    def var(name: str, label: str, query: str, multi: bool = True) -> dict:
        return {"name": name, "label": label, "type": "query", "datasource": DS,
                "query": {"query": query, "refId": f"{name}-var"}, "definition": query, "refresh": 2,
                "includeAll": multi, "multi": multi, "allValue": ".*" if multi else None, "current": {},
                "options": [], "sort": 1, "hide": 0, "regex": f"/^(?!{PLACEHOLDER}$).*/", "skipUrlSync": False}

    if tier_vars:
        out.append(var("tier", "Tenant tier", "label_values(graphfleet_llm_tokens_total, tier)", multi=False))
        out.append(var("kind", "Job kind", "label_values(graphfleet_jobs_total, kind)"))
    out.append(var("model", "Model", "label_values(graphfleet_llm_tokens_total, model)"))
    out.append(var("stage", "Stage", "label_values(graphfleet_llm_tokens_total, stage)"))
    return out


def _layout(panels: list[dict]) -> list[dict]:
    """Ids and gridPos (24 columns, rows wrap), targets get refIds and the datasource."""
    out, x, y, row_h = [], 0, 0, 0
    for i, p in enumerate(panels, start=1):
        p = dict(p)
        w, h = p.pop("w"), p.pop("h")
        if x + w > 24:
            x, y, row_h = 0, y + row_h, 0
        p["id"] = i
        p["gridPos"] = {"h": h, "w": w, "x": x, "y": y}
        if p["type"] == "row":
            p["panels"] = []
        else:
            p["targets"] = [{"refId": chr(ord("A") + j), "datasource": DS, **t} for j, t in enumerate(p["targets"])]
        x, row_h = x + w, max(row_h, h)
        if x >= 24:
            x, y, row_h = 0, y + row_h, 0
        out.append(p)
    return out


def dashboard(uid: str, title: str, panels: list[dict], tier_vars: bool, description: str) -> dict:
    return {
        "uid": uid, "title": title, "description": description, "tags": ["graphfleet"], "timezone": "browser",
        "editable": True, "graphTooltip": 1, "fiscalYearStartMonth": 0, "liveNow": False, "id": None,
        "schemaVersion": 39, "version": 1, "refresh": "30s", "time": {"from": "now-6h", "to": "now"},
        "timepicker": {}, "links": [{"type": "dashboards", "tags": ["graphfleet"], "title": "graphfleet",
                                     "asDropdown": True, "includeVars": True, "keepTime": True}],
        "annotations": {"list": [{"builtIn": 1, "datasource": {"type": "grafana", "uid": "-- Grafana --"},
                                  "enable": True, "hide": True, "iconColor": "rgba(0, 211, 255, 1)",
                                  "name": "Annotations & Alerts", "type": "dashboard"}]},
        "templating": {"list": _variables(tier_vars)},
        "panels": _layout(panels),
    }


def build() -> dict[str, dict]:
    return {
        "graphfleet-overview.json": dashboard(
            "graphfleet-overview", "graphfleet overview", OVERVIEW, False,
            "LLM spend, tokens, latency, errors and cache; queues, tasks and jobs of the whole fleet."),
        "graphfleet-tier.json": dashboard(
            "graphfleet-tier", "graphfleet tenant tier", TIER, True,
            "One tenant tier: spend, tokens, cache, jobs and latency (tenant ids are not labels; per-job "
            "usage is GET /v1/jobs/{id})."),
    }


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    for name, dash in build().items():
        (OUT / name).write_text(json.dumps(dash, indent=2) + "\n")
        print(f"wrote {OUT / name}: {sum(p['type'] != 'row' for p in dash['panels'])} panels")


if __name__ == "__main__":
    main()
