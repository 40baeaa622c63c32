"""Local-query latency through the gateway, as a user of the service sees it: ``POST /v1/queries?wait=60``
from send to answer, p50 / p95 over warm queries, and the first query of a fresh stack against the warm ones.

    .venv/bin/python -m bench.suites.gateway_latency [--latency 0] [--repeat 40] [--mode local] [--trials 3]
        [--ingestions 3] [--idle 2] [--out bench/results/gateway_latency.jsonl]
"""

from __future__ import annotations

import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

import httpx

from bench.harness.cpu import cpu_seconds
from bench.harness.llm_calls import in_flight_s, job_calls
from bench.harness.results import SAMPLE, carol_question, emit, machine, median, parser, percentile
from bench.harness.stacks import redis_server, simulator
from graphfleet_cli.stack import Stack
from shared.infra.redis.conn import free_port

ADMIN_KEY = "adm-bench-gateway-latency"
TENANT = "lat"
IDLE_S = 6.0  # longer than uvicorn's keep-alive (5 s): the LLM server has closed the idle connection
MODES = ("local", "naive")


class Asked(NamedTuple):
    """One query as the client saw it: wall seconds, the worker's seconds, its id, its context build's ms."""
    wall: float
    worker_s: float | None
    query_id: str | None
    context_ms: float | None


def own_ms(asked: Asked, llm_ms: dict[str, float]) -> float | None:
    """graphfleet's own milliseconds on a query's path: its wall time less its LLM calls' (None: not found)."""
    return None if asked.query_id not in llm_ms else 1000 * asked.wall - llm_ms[asked.query_id]


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


def _query(gw: httpx.Client, headers: dict, mode: str, text: str) -> Asked:
    started = time.perf_counter()
    r = gw.post("/v1/queries", params={"wait": 60}, headers=headers, json={"mode": mode, "query": text})
    wall = time.perf_counter() - started
    body = r.json()
    if r.status_code != 200 or body.get("status") != "succeeded":
        raise RuntimeError(f"query did not finish within ?wait: {r.status_code} {body}")
    return Asked(wall, body.get("seconds"), body.get("query_id"), (body.get("details") or {}).get("context_ms"))


def _pickup_ms(gw: httpx.Client, headers: dict, query_id: str | None) -> float | None:
    """Milliseconds from the query's submission to a worker starting it (its ``retrieve`` stage time)."""
    if not query_id:
        return None
    started = gw.get(f"/v1/jobs/{query_id}", headers=headers).json().get("stage_times", {}).get("retrieve")
    return None if started is None else round(1000 * started, 1)


def _breakdown(gw: httpx.Client, headers: dict, first: Asked, warm: list[Asked]) -> dict:
    """A first query's queue pickup and context build against the warm medians (read after the timed queries)."""
    return {"first_pickup_ms": _pickup_ms(gw, headers, first.query_id), "first_context_ms": first.context_ms,
            "warm_pickup_ms_p50": median([_pickup_ms(gw, headers, w.query_id) for w in warm]),
            "warm_context_ms_p50": median([w.context_ms for w in warm], 2)}


def _llm_ms(redis_url: str, tenant: str, since: float, asked: list[Asked]) -> dict[str, float]:
    """Per query, the milliseconds some LLM call of it was in flight (the tenant's usage records)."""
    ids = [a.query_id for a in asked if a.query_id]
    calls = job_calls(redis_url, tenant, ids, since, time.time())
    return {qid: 1000 * in_flight_s(records) for qid, records in calls.items()}


def _own(first: Asked, warm: list[Asked], llm_ms: dict[str, float]) -> dict:
    """graphfleet's own time on a query's path (``own_ms``), first against the warm ones."""
    warm_own = [o for o in (own_ms(w, llm_ms) for w in warm) if o is not None]
    first_own = own_ms(first, llm_ms)
    if first_own is None or not warm_own:
        return {}
    return {"first_own_ms": round(first_own, 1), "warm_own_ms_p50": median(warm_own, 1),
            "warm_own_ms_p95": round(percentile(warm_own, 0.95), 1), "first_llm_ms": round(llm_ms[first.query_id], 1),
            "warm_llm_ms_p50": median([llm_ms.get(w.query_id) for w in warm], 1)}


def _after_idle(ask: Callable[[], Asked], count: int, redis_url: str, tenant: str) -> dict:
    """``count`` queries, each after ``IDLE_S`` with none: a warm stack after a pause (its caches warm, not the
    CPU's, the connections' or the LLM server's keep-alive), the fair reference for a first query."""
    if count <= 0:
        return {}
    since, asked = time.time(), []
    for _ in range(count):
        time.sleep(IDLE_S)
        asked.append(ask())
    llm_ms = _llm_ms(redis_url, tenant, since, asked)
    return {"idle_s": IDLE_S, "idle_wall_s": [round(a.wall, 4) for a in asked],
            "idle_own_ms": [round(o, 1) for o in (own_ms(a, llm_ms) for a in asked) if o is not None]}


def _phase(gw: httpx.Client, headers: dict, phase: str, args, run: list[int], cpu: Callable[[], dict[str, float]],
           redis_url: str, tenant: str = TENANT) -> dict:
    """The first query, then ``--repeat`` warm ones, then ``--idle`` after a pause each, as ``tenant``; ``cpu``:
    CPU seconds used so far per process group."""
    def ask() -> Asked:
        run[0] += 1
        return _query(gw, headers, args.mode, carol_question(run[0]))

    since, start = time.time(), cpu()
    first = ask()
    before = cpu()
    warm = [ask() for _ in range(args.repeat)]
    after = cpu()
    walls = [w.wall for w in warm]
    p50, p95 = statistics.median(walls), percentile(walls, 0.95)
    return {"phase": phase, "mode": args.mode, "first_s": round(first.wall, 4), "first_worker_s": first.worker_s,
            "warm_runs": args.repeat, "warm_p50_s": round(p50, 4), "warm_p95_s": round(p95, 4),
            "warm_min_s": round(min(walls), 4), "warm_max_s": round(max(walls), 4),
            "p95_over_p50": round(p95 / p50, 2), "first_over_p50": round(first.wall / p50, 2),
            "warm_worker_p50_s": statistics.median(w.worker_s for w in warm if w.worker_s is not None),
            **_breakdown(gw, headers, first, warm),
            **_own(first, warm, _llm_ms(redis_url, tenant, since, [first, *warm])),
            # one query's path is serial (gateway -> worker -> LLM -> worker -> gateway): what each process
            # computed per warm query, the simulator's share included, bounds the wall time from below
            "warm_cpu_ms_per_query": {k: round(1000 * (v - before.get(k, 0.0)) / args.repeat, 1)
                                      for k, v in sorted(after.items())},
            # what every process computed while the first query ran: the query's own share, and what else (a
            # stack's other workers still starting, an ingestion's last work) took the 2 cores from it
            "first_cpu_ms": {k: round(1000 * (v - start.get(k, 0.0)), 1) for k, v in sorted(before.items())},
            **_after_idle(ask, args.idle, redis_url, tenant)}


def run(args) -> list[dict]:
    """``--ingestions`` phases on one stack (each a new tenant's ingestion, then its queries), then ``--trials``
    restarts of the stack, each with its own first query."""
    records, counter = [], [0]
    base = {"bench": "gateway_latency", "latency_ms": args.latency, "corpus": SAMPLE.name}
    with simulator(latency_ms=args.latency) as llm, redis_server() as url, tempfile.TemporaryDirectory() as tmp:
        env = {"GRAPHFLEET_LLM_BASE_URL": llm, "GRAPHFLEET_LLM_API_KEY": "sk-bench", "GRAPHFLEET_ADMIN_KEY": ADMIN_KEY}
        for trial in range(-1, args.trials):  # -1: the stack the ingestions run on
            stack = Stack(data_dir=Path(tmp), redis_url=url, extra_env=env, gateway_port=free_port()).start()

            def cpu(stack=stack) -> dict[str, float]:
                return cpu_seconds(stack, llm, url, precise=True)

            try:
                with httpx.Client(base_url=stack.gateway_url, timeout=120) as gw:
                    for ingestion in range(args.ingestions if trial < 0 else 0):
                        tenant = TENANT if ingestion == 0 else f"{TENANT}-{ingestion}"  # lat, lat-1, lat-2...
                        tenant_headers = _tenant(gw, tenant)
                        if ingestion == 0:
                            headers = tenant_headers  # the restarted stacks query the first tenant
                        ingest_s = _ingest(gw, tenant_headers)
                        phase = _phase(gw, tenant_headers, "after_ingest", args, counter, cpu, url, tenant)
                        records.append({**base, **phase, "ingest_s": round(ingest_s, 3), "trial": ingestion,
                                        "tenant": tenant})
                    if trial >= 0:
                        records.append({**base, **_phase(gw, headers, "fresh_stack", args, counter, cpu, url),
                                        "trial": trial})
            finally:
                stack.stop()
    emit([{**record, "machine": machine()} for record in records], args.out)
    return records


def main() -> None:
    ap = parser(__doc__, latency=0.0, repeat=40)
    ap.add_argument("--mode", default="local", choices=MODES)
    ap.add_argument("--trials", type=int, default=3, help="fresh stacks measured (each restarted, its first query)")
    ap.add_argument("--ingestions", type=int, default=3,
                    help="after-ingestion phases, each a new tenant ingesting the document, its first query")
    ap.add_argument("--idle", type=int, default=2, help=f"queries per phase after {IDLE_S:g} s with none, each")
    args = ap.parse_args()
    args.trials, args.idle, args.ingestions = max(1, args.trials), max(0, args.idle), max(1, args.ingestions)
    run(args)


if __name__ == "__main__":
    main()
