"""Load test through the gateway: concurrent ingestion jobs from several tenants plus concurrent queries.

Starts everything on loopback (an embedded Redis, the LLM simulator with latency, the worker stack with
the gateway), seeds each tenant with one excerpt of *A Christmas Carol* (not measured), then at once
submits ``--ingest-jobs`` ingestion jobs (new excerpts, round-robin over the tenants) and ``--queries``
queries (modes local/global/naive/hybrid in turn) from a bounded asyncio client, and waits for all of
them. Reports throughput, p50/p95/p99 job latency (submit -> terminal, as seen by the client), errors
(HTTP errors after retries, failed jobs, partial queries), 429s that were retried, and the peak Redis
memory (``INFO memory`` ``used_memory_peak``). One JSON line per run, appended to ``bench/results/load.jsonl``.

    .venv/bin/python bench/load.py                       # 5 tenants, 20 ingestion jobs, 100 queries, 200 ms
    .venv/bin/python bench/load.py --queries 20 --ingest-jobs 5 --timeout 300
"""

from __future__ import annotations

import argparse
import asyncio
import secrets
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.common import SAMPLE, emit, machine, redis_server, sim_stats, simulator, wait_gateway  # noqa: E402
from shared.infra.redis_conn import connect, free_port  # noqa: E402

OUT = ROOT / "bench" / "results" / "load.jsonl"
MODES = ("local", "global", "naive", "hybrid")
QUESTIONS = ("Who is Scrooge's nephew?", "What do the ghosts show Scrooge?", "How does Scrooge change?",
             "What happens to Tiny Tim?", "Who was Marley?")
TERMINAL = {"succeeded", "failed", "canceled"}
MAX_429_RETRIES = 20


def percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, max(0, round(q / 100 * len(ordered)) - 1))], 3)


def excerpts(n: int) -> list[str]:
    text = SAMPLE.read_text(encoding="utf-8-sig")
    size = len(text) // n
    return [text[i * size:(i + 1) * size] for i in range(n)]


class Client:
    """An httpx client bounded by a semaphore; retries 429 after Retry-After (counted, not an error)."""

    def __init__(self, base_url: str, concurrency: int):
        self.http = httpx.AsyncClient(base_url=base_url, timeout=90)
        self.gate = asyncio.Semaphore(concurrency)
        self.throttled = 0
        self.errors: list[str] = []

    async def request(self, method: str, url: str, **kwargs) -> httpx.Response | None:
        for _attempt in range(MAX_429_RETRIES):
            async with self.gate:
                try:
                    r = await self.http.request(method, url, **kwargs)
                except httpx.HTTPError as exc:
                    self.errors.append(f"{method} {url}: {type(exc).__name__}")
                    return None
            if r.status_code != 429:
                if r.status_code >= 400:
                    self.errors.append(f"{method} {url}: HTTP {r.status_code} {r.text[:120]}")
                    return None
                return r
            self.throttled += 1
            await asyncio.sleep(float(r.headers.get("Retry-After", "1")))
        self.errors.append(f"{method} {url}: still 429 after {MAX_429_RETRIES} retries")
        return None


async def wait_terminal(client: Client, path: str, headers: dict, deadline: float) -> dict | None:
    while time.monotonic() < deadline:
        r = await client.request("GET", path, headers=headers)
        if r is None:
            return None
        body = r.json()
        if body.get("status") in TERMINAL:
            return body
        await asyncio.sleep(1.0)
    client.errors.append(f"GET {path}: not finished before the deadline")
    return None


async def ingest_job(client: Client, headers: dict, text: str, title: str, deadline: float) -> dict:
    started = time.monotonic()
    r = await client.request("POST", "/v1/documents", json={"documents": [{"text": text, "title": title}]},
                             headers=headers)
    view = await wait_terminal(client, f"/v1/jobs/{r.json()['job_id']}", headers, deadline) if r else None
    return {"kind": "ingest", "ok": bool(view and view["status"] == "succeeded"),
            "seconds": time.monotonic() - started, "status": view and view["status"]}


async def query_job(client: Client, headers: dict, question: str, mode: str, deadline: float) -> dict:
    started = time.monotonic()
    r = await client.request("POST", "/v1/queries?wait=55", json={"query": question, "mode": mode},
                             headers=headers)
    view = None
    if r is not None:
        view = r.json() if r.status_code == 200 else await wait_terminal(
            client, f"/v1/queries/{r.json()['query_id']}", headers, deadline)
    ok = bool(view and view["status"] == "succeeded" and not view.get("partial"))
    return {"kind": "query", "ok": ok, "seconds": time.monotonic() - started, "mode": mode,
            "status": view and view["status"], "partial": bool(view and view.get("partial"))}


async def create_tenants(client: Client, admin_key: str, n: int) -> dict[str, dict]:
    tenants = {}
    for i in range(n):
        tid = f"load{i}"
        limits = {"requests_per_minute": 100_000, "max_concurrent_jobs": 1000}
        r = await client.request("POST", "/v1/tenants", json={"id": tid, "limits": limits},
                                 headers={"X-API-Key": admin_key})
        assert r is not None, client.errors
        r = await client.request("POST", f"/v1/tenants/{tid}/keys", json={"name": "load"},
                                 headers={"X-API-Key": admin_key})
        assert r is not None, client.errors
        tenants[tid] = {"X-API-Key": r.json()["api_key"]}
    return tenants


async def run_load(base_url: str, admin_key: str, args) -> dict:
    client = Client(base_url, args.client_concurrency)
    deadline = time.monotonic() + args.timeout
    tenants = await create_tenants(client, admin_key, args.tenants)
    parts = excerpts(args.tenants + args.ingest_jobs)
    # seed: one excerpt per tenant so that queries have a graph (not measured)
    seeded = await asyncio.gather(*(ingest_job(client, h, parts[i], f"seed-{i}", deadline)
                                    for i, h in enumerate(tenants.values())))
    assert all(s["ok"] for s in seeded), (seeded, client.errors)
    names = list(tenants)
    client.throttled, client.errors = 0, []
    started = time.monotonic()
    jobs = [ingest_job(client, tenants[names[i % len(names)]], parts[args.tenants + i], f"part-{i}", deadline)
            for i in range(args.ingest_jobs)]
    # every query text is distinct (no LLM cache hits between them): "<question> (request i)"
    jobs += [query_job(client, tenants[names[i % len(names)]], f"{QUESTIONS[i // len(names) % len(QUESTIONS)]} "
                       f"(request {i})", MODES[i % len(MODES)], deadline) for i in range(args.queries)]
    results = await asyncio.gather(*jobs)
    wall = time.monotonic() - started
    await client.http.aclose()
    return {"results": results, "wall_s": wall, "throttled": client.throttled, "http_errors": client.errors}


def summarise(run: dict) -> dict:
    out: dict = {"wall_s": round(run["wall_s"], 2), "jobs": len(run["results"]),
                 "jobs_per_s": round(len(run["results"]) / run["wall_s"], 3)}
    for kind in ("ingest", "query"):
        rs = [r for r in run["results"] if r["kind"] == kind]
        secs = [r["seconds"] for r in rs]
        out[kind] = {"jobs": len(rs), "ok": sum(r["ok"] for r in rs), "p50_s": percentile(secs, 50),
                     "p95_s": percentile(secs, 95), "p99_s": percentile(secs, 99),
                     "mean_s": round(statistics.fmean(secs), 3) if secs else None}
    secs = [r["seconds"] for r in run["results"]]
    out["all"] = {"p50_s": percentile(secs, 50), "p95_s": percentile(secs, 95), "p99_s": percentile(secs, 99)}
    out["partial_queries"] = sum(r.get("partial", False) for r in run["results"])
    out["failed_jobs"] = sum(not r["ok"] and not r.get("partial") for r in run["results"])
    out["http_errors"] = len(run["http_errors"])
    out["errors"] = out["failed_jobs"] + out["partial_queries"] + out["http_errors"]
    out["error_samples"] = run["http_errors"][:5]
    out["retried_429"] = run["throttled"]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tenants", type=int, default=5)
    ap.add_argument("--ingest-jobs", type=int, default=20)
    ap.add_argument("--queries", type=int, default=100)
    ap.add_argument("--latency-ms", type=float, default=200.0)
    ap.add_argument("--worker-concurrency", type=int, default=16)
    ap.add_argument("--client-concurrency", type=int, default=64, help="requests in flight at once")
    ap.add_argument("--timeout", type=float, default=1200.0, help="hard bound on the measured run, seconds")
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args()
    if args.tenants < 1 or args.ingest_jobs < 0 or args.queries < 0 or args.ingest_jobs + args.queries > 1000:
        ap.error("need >= 1 tenant and at most 1000 jobs")

    from graphfleet_cli.stack import Stack

    admin_key = "adm-load-" + secrets.token_hex(8)
    with redis_server() as redis_url, simulator(latency_ms=args.latency_ms) as llm, \
            tempfile.TemporaryDirectory() as tmp:
        env = {"GRAPHFLEET_LLM_BASE_URL": llm, "GRAPHFLEET_LLM_API_KEY": "sk-bench", "GRAPHFLEET_ADMIN_KEY": admin_key}
        stack = Stack(data_dir=Path(tmp), redis_url=redis_url, worker_concurrency=args.worker_concurrency,
                      gateway_port=free_port(), extra_env=env).start()
        try:
            wait_gateway(stack.gateway_url)
            run = asyncio.run(run_load(stack.gateway_url, admin_key, args))
        finally:
            stack.stop()
        redis = connect(redis_url)
        memory = redis.info("memory")
        record = {"bench": "load", "tenants": args.tenants, "ingest_jobs": args.ingest_jobs, "queries": args.queries,
                  "latency_ms": args.latency_ms, "worker_concurrency": args.worker_concurrency,
                  **summarise(run), "redis_used_memory_peak_mb": round(memory["used_memory_peak"] / 2**20, 1),
                  "redis_used_memory_mb": round(memory["used_memory"] / 2**20, 1),
                  "llm_calls": sim_stats(llm)["chat"]["calls"], "machine": machine(),
                  "ts": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        redis.close()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    emit(record, args.out)


if __name__ == "__main__":
    main()
