"""Local-query latency through the gateway, as a user of the service sees it: ``POST /v1/queries?wait=60``
from send to answer, p50 / p95 over warm queries, and the first query of a fresh stack against the warm ones.

    .venv/bin/python -m bench.suites.gateway_latency [--latency 0] [--repeat 40] [--mode local] [--trials 3]
        [--ingestions 3] [--out bench/results/gateway_latency.jsonl]
"""

from __future__ import annotations

import itertools
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import httpx

from bench.harness.results import SAMPLE, carol_question, emit, machine, median, parser, percentile, timed
from bench.harness.stacks import redis_server, simulator
from graphfleet_cli.stack import Stack
from shared.infra.redis.conn import free_port

ADMIN_KEY = "adm-bench-gateway-latency"
TENANT = "lat"
MODES = ("local", "naive")


def _tenant(gw: httpx.Client, tenant: str) -> dict:
    admin = {"X-API-Key": ADMIN_KEY}
    gw.post("/v1/tenants", json={"id": tenant, "limits": {"requests_per_minute": 100_000}}, headers=admin)
    key = gw.post(f"/v1/tenants/{tenant}/keys", json={"name": "bench"}, headers=admin).raise_for_status().json()
    return {"X-API-Key": key["api_key"]}


def _ingest(gw: httpx.Client, headers: dict) -> float:
    started = time.perf_counter()
    job = gw.post("/v1/documents", headers=headers, json={"documents": [
        {"text": SAMPLE.read_text(encoding="utf-8-sig"), "id": "christmas-carol", "title": SAMPLE.name}]})
    job_id = job.raise_for_status().json()["job_id"]
    while gw.get(f"/v1/jobs/{job_id}", headers=headers).json()["status"] not in ("succeeded", "failed", "canceled"):
        time.sleep(0.05)
    return time.perf_counter() - started


def _query(gw: httpx.Client, headers: dict, mode: str, text: str) -> float:
    """One query's wall seconds, send to answer."""
    r, wall = timed(gw.post, "/v1/queries", params={"wait": 60}, headers=headers, json={"mode": mode, "query": text})
    body = r.json()
    if r.status_code != 200 or body.get("status") != "succeeded":
        raise RuntimeError(f"query did not finish within ?wait: {r.status_code} {body}")
    return wall


def _phase(gw: httpx.Client, headers: dict, phase: str, args, run: Iterator[int]) -> dict:
    """The first query, then ``--repeat`` warm ones (question ``next(run)`` each)."""
    first, *warm = [_query(gw, headers, args.mode, carol_question(next(run))) for _ in range(args.repeat + 1)]
    return {"phase": phase, "mode": args.mode, "first_s": round(first, 4), "warm_runs": args.repeat,
            "warm_p50_s": median(warm, 4), "warm_p95_s": round(percentile(warm, 0.95), 4)}


def run(args) -> None:
    """``--ingestions`` phases on one stack (each a new tenant's ingestion, then its queries), then ``--trials``
    restarts of the stack, each with its own first query."""
    records, counter = [], itertools.count(1)
    base = {"bench": "gateway_latency", "latency_ms": args.latency, "corpus": SAMPLE.name}
    with simulator(latency_ms=args.latency) as llm, redis_server() as url, tempfile.TemporaryDirectory() as tmp:
        env = {"GRAPHFLEET_LLM_BASE_URL": llm, "GRAPHFLEET_LLM_API_KEY": "sk-bench", "GRAPHFLEET_ADMIN_KEY": ADMIN_KEY}
        for trial in range(-1, args.trials):  # -1: the stack the ingestions run on
            stack = Stack(data_dir=Path(tmp), redis_url=url, extra_env=env, gateway_port=free_port())
            with stack, httpx.Client(base_url=stack.gateway_url, timeout=120) as gw:
                for ingestion in range(args.ingestions if trial < 0 else 0):
                    tenant = TENANT if ingestion == 0 else f"{TENANT}-{ingestion}"  # lat, lat-1, lat-2...
                    tenant_headers = _tenant(gw, tenant)
                    if ingestion == 0:
                        headers = tenant_headers  # the restarted stacks query the first tenant
                    ingest_s = _ingest(gw, tenant_headers)
                    records.append({**base, **_phase(gw, tenant_headers, "after_ingest", args, counter),
                                    "ingest_s": round(ingest_s, 3), "trial": ingestion, "tenant": tenant})
                if trial >= 0:
                    records.append({**base, **_phase(gw, headers, "fresh_stack", args, counter), "trial": trial})
    emit([{**record, "machine": machine()} for record in records], args.out)


def main() -> None:
    ap = parser(__doc__, latency=0.0, repeat=40)
    ap.add_argument("--mode", default="local", choices=MODES)
    ap.add_argument("--trials", type=int, default=3, help="fresh stacks measured (each restarted, its first query)")
    ap.add_argument("--ingestions", type=int, default=3,
                    help="after-ingestion phases, each a new tenant ingesting the document, its first query")
    args = ap.parse_args()
    args.trials, args.ingestions = max(1, args.trials), max(1, args.ingestions)
    run(args)


if __name__ == "__main__":
    main()
