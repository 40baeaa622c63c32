"""A killed worker's cost: issue 61's probe, ``--runs`` times (docs/reliability.md, "A killed worker").

Each run starts a fresh Redis and ``graphfleet up``'s stack with its defaults (processes ``auto``, the default
visibility timeout and lease interval) and the gateway, the LLM simulator at ``--latency`` ms; ingests the first
``--docs`` MSFT earnings-call transcripts (``../shared/data/msft_earnings_calls``) through the gateway; SIGKILLs
every ingest worker process once about a third of the chunks are done (of the undisturbed run's chunk count: the
job's own total grows while its documents are chunked); and prints how many seconds after the kill the job
succeeded, how much longer than the undisturbed job it took, and whether the graph equals the undisturbed run's
(the first stack ingests the same documents once, untouched, as the reference).

    .venv/bin/python -m bench.killed_worker_bench [--runs 5] [--latency 100] [--docs 12]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import tempfile
import time
from pathlib import Path

import httpx

from bench.common import emit, redis_server, simulator, wait_gateway
from bench.datasets import DATA_ROOT
from graphfleet_cli.stack import Stack
from shared.infra.redis_conn import connect, free_port
from shared.infra.store.redis_graph import GraphStore

CORPUS = DATA_ROOT / "msft_earnings_calls" / "corpus.json"
ADMIN_KEY = "adm-bench-killed-worker"
TENANT = "calls"


def documents(count: int) -> list[dict]:
    rows = json.loads(CORPUS.read_text(encoding="utf-8"))[:count]
    return [{"id": row["doc_id"].removesuffix(".txt"), "title": row["doc_id"], "text": row["text"]} for row in rows]


def graph(redis_url: str) -> dict:
    """Everything that defines the tenant's graph, independent of job ids and timing."""
    store = GraphStore(connect(redis_url), TENANT)
    return {"entities": {n: (e.type, e.description, tuple(e.source_ids)) for n, e in store.all_entities().items()},
            "relations": {k: (r.weight, r.description, tuple(r.source_ids))
                          for k, r in store.all_relations().items()},
            "communities": sorted((c.level, tuple(c.nodes)) for c in store.communities().values()),
            **store.stats()}


def _headers(gw: httpx.Client) -> dict:
    admin = {"X-API-Key": ADMIN_KEY}
    gw.post("/v1/tenants", json={"id": TENANT, "limits": {"requests_per_minute": 100_000}}, headers=admin)
    key = gw.post(f"/v1/tenants/{TENANT}/keys", json={"name": "bench"}, headers=admin).raise_for_status().json()
    return {"X-API-Key": key["api_key"]}


def _kill_ingest_at(stack: Stack, gw: httpx.Client, headers: dict, job_id: str, chunks: int) -> float:
    """Poll the job; once ``chunks`` of its chunks are done SIGKILL every ingest worker process."""
    while True:
        view = gw.get(f"/v1/jobs/{job_id}", headers=headers).raise_for_status().json()
        p = view["progress"]
        if view["status"] in ("succeeded", "failed", "canceled"):
            raise RuntimeError(f"the job ended before the kill: {view['status']}")
        if p["chunks_done"] >= chunks:
            procs = [proc for name, proc in stack.procs if name.startswith("ingest")]
            for proc in procs:
                os.kill(proc.pid, signal.SIGKILL)
            killed_at = time.time()
            print(f"  killed {len(procs)} ingest worker process(es) at {p['chunks_done']}/{p['chunks_total']} "
                  "chunks", flush=True)
            return killed_at
        time.sleep(0.1)


def _wait(gw: httpx.Client, headers: dict, job_id: str) -> dict:
    while True:
        view = gw.get(f"/v1/jobs/{job_id}", headers=headers).raise_for_status().json()
        if view["status"] in ("succeeded", "failed", "canceled"):
            return view
        time.sleep(0.1)


def run_once(docs: list[dict], latency: float, kill_at: int | None) -> tuple[dict, float | None, dict]:
    """One fresh stack ingesting ``docs``; killing the ingest workers at ``kill_at`` chunks done (None: not)."""
    env = {"GRAPHFLEET_LLM_API_KEY": "sk-bench", "GRAPHFLEET_ADMIN_KEY": ADMIN_KEY}
    with simulator(latency_ms=latency) as llm, redis_server() as redis_url, tempfile.TemporaryDirectory() as tmp:
        stack = Stack(data_dir=Path(tmp), redis_url=redis_url, processes="auto", gateway_port=free_port(),
                      extra_env={**env, "GRAPHFLEET_LLM_BASE_URL": llm})
        stack.start()
        try:
            wait_gateway(stack.gateway_url)
            with httpx.Client(base_url=stack.gateway_url, timeout=60) as gw:
                headers = _headers(gw)
                started = time.time()
                job_id = gw.post("/v1/documents", headers=headers, json={"documents": docs}).raise_for_status() \
                    .json()["job_id"]
                killed_at = None if kill_at is None else _kill_ingest_at(stack, gw, headers, job_id, kill_at)
                view = _wait(gw, headers, job_id)
                after = None if killed_at is None else round(time.time() - killed_at, 1)
                took = round(time.time() - started, 1)
                supervisor = {"restarts": stack.supervisor.restarts, "reclaimed": stack.supervisor.reclaimed}
            return {"status": view["status"], "failures": view["failures"], "job_seconds": took,
                    "chunks": view["progress"]["chunks_total"], **supervisor}, after, graph(redis_url)
        finally:
            stack.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--latency", type=float, default=100.0)
    parser.add_argument("--docs", type=int, default=12)
    parser.add_argument("--kill-at", type=float, default=1 / 3, help="fraction of the chunks done at the kill")
    args = parser.parse_args()
    docs = documents(args.docs)
    print(f"== undisturbed run: {len(docs)} earnings calls, simulator at {args.latency:g} ms", flush=True)
    view, _after, reference = run_once(docs, args.latency, None)
    assert view["status"] == "succeeded", view
    clean_s, kill_at = view["job_seconds"], max(1, round(view["chunks"] * args.kill_at))
    print(f"  undisturbed: {view['chunks']} chunks, {clean_s} s", flush=True)
    figures = []
    for run in range(1, args.runs + 1):
        print(f"== run {run}: every ingest worker SIGKILLed at {kill_at} chunks done", flush=True)
        view, after, got = run_once(docs, args.latency, kill_at)
        same = got == reference
        figures.append(after)
        emit({"bench": "killed_worker", "run": run, "latency_ms": args.latency, "docs": len(docs),
              "seconds_after_kill": after, "seconds_over_undisturbed": round(view["job_seconds"] - clean_s, 1),
              "graph_identical": same, **view})
    print(f"seconds after the kill: {figures}", flush=True)


if __name__ == "__main__":
    main()
