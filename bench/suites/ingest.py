"""Ingest the Christmas Carol through a running stack with the simulator at 0 ms and 200 ms.

    .venv/bin/python -m bench.suites.ingest [--latency 0 200] [--repeat 3] [--ms-per-completion-token 12.5]
        [--processes 1|N|auto] [--concurrency 16] [--out bench/results/ingest.jsonl]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from pathlib import Path

from bench.harness.cpu import group_cpu, stack_processes
from bench.harness.results import SAMPLE, emit, machine
from bench.harness.stacks import redis_server, sim_stats, simulator, stack
from graphfleet_cli.local_client import LocalClient
from graphfleet_cli.stack import parse_processes


def run_once(latency: float, concurrency: int, run: int, processes: int | str = 1, ms_per_token: float = 0.0) -> dict:
    """One ingestion of the Carol on a fresh simulator, Redis and worker stack: a stack's first ingestion."""
    sim = simulator(latency_ms=latency, ms_per_completion_token=ms_per_token)
    with sim as llm, redis_server() as redis_url, stack(redis_url, llm, concurrency or None, processes) as st:
        client = LocalClient(redis_url)
        tenant = f"bench{run}"
        procs = stack_processes(st, llm, redis_url)
        cpu_before = group_cpu(procs)
        started = time.perf_counter()
        job = client.ingest_files(tenant, [SAMPLE])
        view = client.wait(tenant, job["job_id"], timeout=1800)
        seconds = time.perf_counter() - started
        cpu = {k: round(v - cpu_before.get(k, 0.0), 2) for k, v in group_cpu(procs).items()}
        stats = client.stats(tenant)
        sim = sim_stats(llm)
        usage = view["usage"]
        return {
            "bench": "ingest", "latency_ms": latency, "ms_per_completion_token": ms_per_token,
            "concurrency": concurrency, "processes": processes, "run": run,
            "status": view["status"], "seconds": round(seconds, 3),
            "llm_calls": usage["calls"], "calls_by_stage": {s: v.get("calls", 0) for s, v in usage["by_stage"].items()},
            "prompt_tokens": usage["prompt_tokens"], "completion_tokens": usage["completion_tokens"],
            "stage_times": view.get("stage_times"),
            "cpu_seconds": cpu, "cpu_seconds_total": round(sum(cpu.values()), 2),
            # cores busy on average over the run (CPU seconds / wall seconds): at the machine's core count the
            # run is CPU-bound; well below it, it waits on the LLM or on one process's GIL
            "cores_busy": round(sum(cpu.values()) / seconds, 2), "cores": os.cpu_count(),
            "sim_chat_calls": sim["chat"]["calls"],
            "sim_embedding_calls": sim["embeddings"]["calls"],
            **{k: stats[k] for k in ("chunks", "entities", "relations", "communities_by_level", "reports")},
        }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--latency", type=float, nargs="+", default=[0.0, 200.0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--processes", type=parse_processes, default=1, help="worker processes per queue group, or auto")
    ap.add_argument("--ms-per-completion-token", type=float, default=0.0,
                    help="simulated generation time per completion token (default 0)")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    emit({"bench": "machine", **machine()}, args.out)
    for latency in args.latency:
        runs = [run_once(latency, args.concurrency, i, args.processes, args.ms_per_completion_token)
                for i in range(args.repeat)]
        for r in runs:
            emit(r, args.out)
        emit({"bench": "ingest_median", "latency_ms": latency, "ms_per_completion_token": args.ms_per_completion_token,
              "processes": args.processes, "runs": len(runs),
              "seconds_median": statistics.median(r["seconds"] for r in runs),
              "cpu_seconds_median": statistics.median(r["cpu_seconds_total"] for r in runs),
              "cores_busy_median": statistics.median(r["cores_busy"] for r in runs),
              "llm_calls": runs[0]["llm_calls"], "prompt_tokens": runs[0]["prompt_tokens"],
              "completion_tokens": runs[0]["completion_tokens"]}, args.out)


if __name__ == "__main__":
    main()
