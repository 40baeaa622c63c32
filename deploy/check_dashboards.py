"""Run every Grafana panel's PromQL against a real Prometheus that scraped a real graphfleet run.

    .venv/bin/pip install -e '.[bench]'            # matplotlib, for the PNG
    apt-get install -y prometheus                  # Debian: prometheus + promtool
    .venv/bin/python deploy/check_dashboards.py [--load-seconds 240] [--out bench/results/prometheus_check.json]

What it does, all on this machine:
1. starts the LLM simulator (latency, 5xx errors and a requests-per-minute limit, so 429s happen),
   the embedded stack (its own Redis, one Celery worker process per queue group, the gateway),
   and Prometheus scraping the gateway's ``/metrics`` every 2 s with ``deploy/prometheus/alerts.yml`` and the
   recording rules the dashboards read (``deploy/prometheus/recording.yml``) loaded;
2. through the gateway's HTTP API: creates a ``gold`` and a ``standard`` tenant, ingests
   graphfleet_cli/sample/christmas_carol.txt (gold) and a part of it (standard), then runs queries of
   every mode (each question twice, so the LLM cache is hit) for ``--load-seconds``;
3. evaluates every target of deploy/grafana/dashboards/*.json as a range query over the run
   (``$__rate_interval`` = 1m, ``$tier`` = gold, multi-value variables = ``.*``) and counts the series that
   returned data; every alert rule must evaluate without error (``/api/v1/rules``);
4. writes the results (JSON) and docs/img/dashboard-overview.png (main panels, plotted from the same data).
Exit status 1 when a panel target returned no data or a rule failed to evaluate. Targets reading only another
exporter's series (the Redis row: redis_exporter, not run here) are listed as ``external`` and not counted.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from graphfleet_cli.stack import Stack  # noqa: E402
from shared.infra.redis.conn import free_port  # noqa: E402

DASHBOARDS = ROOT / "deploy" / "grafana" / "dashboards"
ALERTS = ROOT / "deploy" / "prometheus" / "alerts.yml"
RECORDING = ROOT / "deploy" / "prometheus" / "recording.yml"
SAMPLE = ROOT / "graphfleet_cli" / "sample" / "christmas_carol.txt"
ADMIN = "adm-prometheus-check-key"
SCRAPE_S = 2
VARIABLES = {"$__rate_interval": "1m", "$tier": "gold", "$model": ".*", "$stage": ".*", "$kind": ".*"}
QUESTIONS = [
    ("local", "Who is Ebenezer Scrooge and how does he change?"),
    ("global", "What are the main themes of the story?"),
    ("naive", "What happens on Christmas morning?"),
    ("hybrid", "How is Bob Cratchit related to Scrooge?"),
    ("causal", "Why does Scrooge change his ways?"),
    ("local", "What does Marley's ghost tell Scrooge?"),
    ("global", "How do the three spirits differ?"),
]


def substitute(expr: str) -> str:
    for var, value in sorted(VARIABLES.items(), key=lambda kv: -len(kv[0])):
        expr = expr.replace(var, value)
    return expr


# ------------------------------------------------------------------------------ processes
def start_simulator(port: int, log_dir: Path) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "llm_simulator", "--port", str(port), "--latency-ms", "120", "--error-rate", "0.02",
           "--rate-limit-rpm", "300", "--seed", "11"]
    log = open(log_dir / "simulator.log", "ab")  # noqa: SIM115 - owned by the child
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
    wait_http(f"http://127.0.0.1:{port}/stats")
    return proc


def start_prometheus(port: int, gateway: str, work: Path) -> subprocess.Popen:
    binary = shutil.which("prometheus")
    if not binary:
        raise SystemExit("prometheus is not installed (Debian: apt-get install -y prometheus)")
    host = gateway.removeprefix("http://")
    config = work / "prometheus.yml"
    config.write_text(
        f"global:\n  scrape_interval: {SCRAPE_S}s\n  evaluation_interval: {SCRAPE_S}s\n"
        f"rule_files:\n  - {ALERTS}\n  - {RECORDING}\n"
        f"scrape_configs:\n  - job_name: graphfleet-gateway\n    static_configs:\n      - targets: ['{host}']\n")
    cmd = [binary, f"--config.file={config}", f"--storage.tsdb.path={work / 'tsdb'}",
           f"--web.listen-address=127.0.0.1:{port}", "--log.level=warn"]
    log = open(work / "prometheus.log", "ab")  # noqa: SIM115
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    wait_http(f"http://127.0.0.1:{port}/-/ready")
    return proc


def wait_http(url: str, timeout: float = 60.0) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            if httpx.get(url, timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.3)
    raise RuntimeError(f"{url} not up after {timeout}s")


# ------------------------------------------------------------------------------ load
class Load:
    """Tenants, ingestion and queries through the gateway's public API."""

    def __init__(self, gateway: str, corpus_chars: int = 0):
        self.gateway = gateway
        self.corpus_chars = corpus_chars
        self.admin = httpx.Client(base_url=gateway, headers={"X-API-Key": ADMIN}, timeout=120)
        self.clients: dict[str, httpx.Client] = {}
        self.counts = {"ingest_jobs": 0, "queries": 0, "queries_failed": 0}

    def tenant(self, tenant_id: str, tier: str) -> httpx.Client:
        r = self.admin.post("/v1/tenants", json={"id": tenant_id, "name": tenant_id, "tier": tier})
        r.raise_for_status()
        key = self.admin.post(f"/v1/tenants/{tenant_id}/keys", json={"name": "check"}).json()["api_key"]
        self.clients[tier] = httpx.Client(base_url=self.gateway, headers={"X-API-Key": key}, timeout=120)
        return self.clients[tier]

    def ingest(self, tier: str, text: str, title: str) -> str:
        r = self.clients[tier].post("/v1/documents", json={"documents": [{"text": text, "title": title}]})
        r.raise_for_status()
        self.counts["ingest_jobs"] += 1
        return r.json()["job_id"]

    def wait_job(self, tier: str, job_id: str, timeout: float = 1800) -> dict:
        deadline = time.time() + timeout
        while time.time() < deadline:
            view = self.clients[tier].get(f"/v1/jobs/{job_id}").json()
            if view.get("status") in ("succeeded", "failed", "canceled"):
                return view
            time.sleep(1)
        raise TimeoutError(job_id)

    def query(self, tier: str, mode: str, text: str) -> None:
        r = self.clients[tier].post("/v1/queries", params={"wait": 60}, json={"query": text, "mode": mode})
        self.counts["queries"] += 1
        if r.status_code not in (200, 202) or r.json().get("status") not in ("succeeded", "queued", "running"):
            self.counts["queries_failed"] += 1

    def run(self, load_seconds: float) -> None:
        self.tenant("checkgold", "gold")
        self.tenant("checkstd", "standard")
        text = SAMPLE.read_text(encoding="utf-8-sig")
        text = text[: self.corpus_chars] if self.corpus_chars else text
        jobs = [("gold", self.ingest("gold", text, "A Christmas Carol")),
                ("standard", self.ingest("standard", text[: len(text) // 3], "A Christmas Carol, first third"))]
        for tier, job_id in jobs:
            view = self.wait_job(tier, job_id)
            print(f"ingest {tier}: {view.get('status')} {view.get('progress')}", flush=True)
        deadline = time.time() + load_seconds
        threads = [threading.Thread(target=self._query_loop, args=(tier, deadline), daemon=True)
                   for tier in ("gold", "standard")]
        for t in threads:
            t.start()
        # a late ingestion job, so job throughput/latency panels have data after the first minutes too
        late = self.ingest("standard", text[len(text) // 2 :], "A Christmas Carol, second half")
        self.wait_job("standard", late)
        for t in threads:
            t.join()

    def _query_loop(self, tier: str, deadline: float) -> None:
        i = 0
        while time.time() < deadline:
            mode, text = QUESTIONS[i % len(QUESTIONS)]
            if i >= len(QUESTIONS):  # a new wording each round, so the LLM keeps being called
                text = f"{text} Answer for reader number {i // len(QUESTIONS)}."
            for _repeat in range(2):  # the second run is answered from the LLM cache
                self.query(tier, mode, text)
            i += 1


# ------------------------------------------------------------------------------ checks
def query_range(prom: str, expr: str, start: float, end: float, step: int = 5) -> list[dict]:
    r = httpx.get(f"{prom}/api/v1/query_range", params={"query": expr, "start": start, "end": end, "step": step},
                  timeout=60)
    body = r.json()
    if body.get("status") != "success":
        raise RuntimeError(f"{expr}: {body.get('error')}")
    return body["data"]["result"]


def finite_points(series: dict) -> list[tuple[float, float]]:
    out = []
    for ts, v in series["values"]:
        f = float(v)
        if math.isfinite(f):
            out.append((float(ts), f))
    return out


def check_panels(prom: str, start: float, end: float) -> tuple[list[dict], dict]:
    rows, data = [], {}
    for path in sorted(DASHBOARDS.glob("*.json")):
        dash = json.loads(path.read_text())
        for panel in dash["panels"]:
            for target in panel.get("targets", []):
                expr = substitute(target["expr"])
                result = query_range(prom, expr, start, end)
                with_data = [s for s in result if finite_points(s)]
                rows.append({"dashboard": dash["uid"], "panel_id": panel["id"], "panel": panel["title"],
                             "ref": target["refId"], "expr": expr, "series": len(with_data),
                             "points": sum(len(finite_points(s)) for s in with_data),
                             "external": "graphfleet" not in expr})
                data[(dash["uid"], panel["id"], target["refId"])] = with_data
    return rows, data


def check_rules(prom: str, start: float, end: float) -> list[dict]:
    groups = httpx.get(f"{prom}/api/v1/rules", timeout=30).json()["data"]["groups"]
    rows = []
    for group in groups:
        for rule in group["rules"]:
            fired = query_range(prom, rule["query"], start, end)
            rows.append({"alert": rule["name"], "health": rule["health"], "error": rule.get("lastError", ""),
                         "state": rule.get("state"), "series_matching": len(fired)})
    return rows


def markdown(rows: list[dict], rules: list[dict]) -> str:
    lines = ["| dashboard | panel | target | series with data | points |", "|---|---|---|---|---|"]
    for r in rows:
        series = f"{r['series']} (external)" if r["external"] else r["series"]
        lines.append(f"| {r['dashboard']} | {r['panel_id']}. {r['panel']} | {r['ref']} | {series} | {r['points']} |")
    lines += ["", "| alert rule | health | series matching during the run |", "|---|---|---|"]
    for r in rules:
        lines.append(f"| {r['alert']} | {r['health']} | {r['series_matching']} |")
    return "\n".join(lines)


# ------------------------------------------------------------------------------ plot
PLOTTED = [  # (overview panel title, target refIds)
    "LLM spend ($/h)", "Tokens/min by model and stage", "LLM latency p50/p95/p99",
    "LLM errors/s by cause", "LLM cache hit rate", "Queue depth",
    "Task latency p95 by queue", "Jobs/min by kind and status", "End-to-end job latency (submit to done)",
]


def plot(data: dict, out: Path, start: float) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    dash = json.loads((DASHBOARDS / "graphfleet-overview.json").read_text())
    panels = {p["title"]: p for p in dash["panels"]}
    fig, axes = plt.subplots(3, 3, figsize=(18, 12))
    for ax, title in zip(axes.flat, PLOTTED, strict=True):
        panel = panels[title]
        for target in panel["targets"]:
            for series in data.get(("graphfleet-overview", panel["id"], target["refId"]), [])[:12]:
                pts = finite_points(series)
                label = legend(target.get("legendFormat", ""), series["metric"])
                ax.plot([(t - start) / 60 for t, _v in pts], [v for _t, v in pts], label=label, linewidth=1.2)
        ax.set_title(f"{title} [{panel['fieldConfig']['defaults'].get('unit', '')}]", fontsize=10)
        ax.set_xlabel("minutes since start", fontsize=8)
        ax.tick_params(labelsize=8)
        ax.grid(alpha=0.3)
        if ax.lines:
            ax.legend(fontsize=6, loc="upper left")
    fig.suptitle("graphfleet overview: real Prometheus data from a local run (LLM simulator)", fontsize=13)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=80)


def legend(fmt: str, labels: dict) -> str:
    """A series' name as Grafana renders ``legendFormat``: ``{{label}}`` (spaces allowed) is the label's value, or
    nothing when the series has no such label (the ``or vector(0)`` line of a panel that counts zero); the series'
    labels when there is no format or nothing is left."""
    shown = re.sub(r"\{\{\s*([\w.]+)\s*\}\}", lambda m: str(labels.get(m.group(1), "")), fmt).strip()
    return shown or json.dumps(labels)


# ------------------------------------------------------------------------------ main
def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--load-seconds", type=float, default=240.0, help="query load after ingestion")
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "prometheus_check.json")
    ap.add_argument("--png", type=Path, default=ROOT / "docs" / "img" / "dashboard-overview.png")
    ap.add_argument("--corpus-chars", type=int, default=0, help="ingest only this many characters (0: all)")
    ap.add_argument("--keep", action="store_true", help="keep the work directory (TSDB, logs)")
    args = ap.parse_args(argv)

    work = Path(tempfile.mkdtemp(prefix="gf-promcheck-"))
    sim_port, gw_port, prom_port = free_port(), free_port(), free_port()
    sim = start_simulator(sim_port, work)
    env = {"GRAPHFLEET_LLM_BASE_URL": f"http://127.0.0.1:{sim_port}/v1", "GRAPHFLEET_LLM_API_KEY": "sk-sim",
           "GRAPHFLEET_ADMIN_KEY": ADMIN}
    stack = Stack(data_dir=work / "stack", gateway_port=gw_port, extra_env=env)
    prom = None
    try:
        stack.start()
        wait_http(stack.gateway_url + "/healthz")
        prom = start_prometheus(prom_port, stack.gateway_url, work)
        prom_url = f"http://127.0.0.1:{prom_port}"
        start = time.time()
        print(f"work dir {work}; gateway {stack.gateway_url}; prometheus {prom_url}", flush=True)
        load = Load(stack.gateway_url, args.corpus_chars)
        load.run(args.load_seconds)
        time.sleep(20)  # a few more scrapes of the final state
        end = time.time()
        rows, data = check_panels(prom_url, start, end)
        rules = check_rules(prom_url, start, end)
        sim_stats = httpx.get(f"http://127.0.0.1:{sim_port}/stats").json()
        chat = {k: sim_stats["chat"][k] for k in ("calls", "prompt_tokens", "completion_tokens")}
        result = {"started": start, "ended": end, "minutes": round((end - start) / 60, 2),
                  "scrape_interval_s": SCRAPE_S, "load": load.counts,
                  "simulator": {"chat": chat, "embeddings": sim_stats["embeddings"], "errors": sim_stats["errors"]},
                  "panels": rows, "rules": rules}
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=2) + "\n")
        plot(data, args.png, start)
        print(markdown(rows, rules))
        empty = [r for r in rows if r["series"] == 0 and not r["external"]]
        broken = [r for r in rules if r["health"] != "ok"]
        print(f"\n{len(rows)} panel targets, {len(rows) - len(empty)} returned data; {len(rules)} rules, "
              f"{len(rules) - len(broken)} healthy; run {result['minutes']} min; load {load.counts}")
        print(f"wrote {args.out} and {args.png}")
        return 1 if empty or broken else 0
    finally:
        if prom is not None:
            prom.terminate()
            prom.wait(timeout=30)
        stack.stop()
        sim.terminate()
        sim.wait(timeout=30)
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
