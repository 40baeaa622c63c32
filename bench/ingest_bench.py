"""Ingest the Christmas Carol through a running stack with the simulator at 0 ms and 200 ms.

    .venv/bin/python -m bench.ingest_bench [--latency 0 200] [--repeat 3] [--out bench/results/ingest.jsonl]

Prints wall seconds, LLM calls by stage and prompt/completion tokens per run, then medians.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

from bench.common import SAMPLE, emit, machine, redis_server, sim_stats, simulator, stack
from graphfleet_cli.local_client import LocalClient


def run_once(latency: float, concurrency: int, run: int, processes: int = 1) -> dict:
    with (simulator(latency_ms=latency) as llm, redis_server() as redis_url,
          stack(redis_url, llm, concurrency, processes)):
        client = LocalClient(redis_url)
        tenant = f"bench{run}"
        started = time.perf_counter()
        job = client.ingest_files(tenant, [SAMPLE])
        view = client.wait(tenant, job["job_id"], timeout=1800)
        seconds = time.perf_counter() - started
        stats = client.stats(tenant)
        sim = sim_stats(llm)
        usage = view["usage"]
        return {
            "bench": "ingest", "latency_ms": latency, "concurrency": concurrency, "processes": processes, "run": run,
            "status": view["status"], "seconds": round(seconds, 3),
            "llm_calls": usage["calls"], "calls_by_stage": {s: v.get("calls", 0) for s, v in usage["by_stage"].items()},
            "prompt_tokens": usage["prompt_tokens"], "completion_tokens": usage["completion_tokens"],
            "stage_times": view.get("stage_times"), "sim_chat_calls": sim["chat"]["calls"],
            "sim_embedding_calls": sim["embeddings"]["calls"],
            **{k: stats[k] for k in ("chunks", "entities", "relations", "communities_by_level", "reports")},
        }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--latency", type=float, nargs="+", default=[0.0, 200.0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--processes", type=int, default=1, help="worker processes per queue group")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    emit({"bench": "machine", **machine()}, args.out)
    for latency in args.latency:
        runs = [run_once(latency, args.concurrency, i, args.processes) for i in range(args.repeat)]
        for r in runs:
            emit(r, args.out)
        emit({"bench": "ingest_median", "latency_ms": latency, "processes": args.processes, "runs": len(runs),
              "seconds_median": statistics.median(r["seconds"] for r in runs),
              "llm_calls": runs[0]["llm_calls"], "prompt_tokens": runs[0]["prompt_tokens"],
              "completion_tokens": runs[0]["completion_tokens"]}, args.out)


if __name__ == "__main__":
    main()
