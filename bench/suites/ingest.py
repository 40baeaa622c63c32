"""Ingest the Christmas Carol through a running stack with the simulator at 0 ms and 200 ms.

    .venv/bin/python -m bench.suites.ingest [--latency 0 200] [--repeat 3] [--ms-per-completion-token 12.5]
        [--processes 1|N|auto] [--concurrency 16] [--out bench/results/ingest.jsonl]
"""

from __future__ import annotations

from bench.harness.results import SAMPLE, emit, machine, median, parser, timed
from bench.harness.stacks import client_stack, simulator


def run_once(latency: float, concurrency: int, run: int, processes: int | str = 1, ms_per_token: float = 0.0) -> dict:
    """One ingestion of the Carol on a fresh simulator, Redis and worker stack: a stack's first ingestion."""
    sim = simulator(latency_ms=latency, ms_per_completion_token=ms_per_token)
    with sim as llm, client_stack(llm, concurrency or None, processes) as (_url, _st, client):
        tenant = f"bench{run}"
        view, seconds = timed(lambda: client.wait(tenant, client.ingest_files(tenant, [SAMPLE])["job_id"], 1800))
        stats, usage = client.stats(tenant), view["usage"]
        return {
            "bench": "ingest", "latency_ms": latency, "ms_per_completion_token": ms_per_token,
            "concurrency": concurrency, "processes": processes, "run": run,
            "status": view["status"], "seconds": round(seconds, 3),
            "llm_calls": usage["calls"], "calls_by_stage": {s: v.get("calls", 0) for s, v in usage["by_stage"].items()},
            "prompt_tokens": usage["prompt_tokens"], "completion_tokens": usage["completion_tokens"],
            **{k: stats[k] for k in ("chunks", "entities", "relations", "communities_by_level", "reports")},
        }


def main() -> None:
    args = parser(__doc__, latency=[0.0, 200.0], repeat=3, concurrency=16, processes=1,
                  ms_per_completion_token=0.0).parse_args()
    emit({"bench": "machine", **machine()}, args.out)
    for latency in args.latency:
        runs = [run_once(latency, args.concurrency, i, args.processes, args.ms_per_completion_token)
                for i in range(args.repeat)]
        emit(runs, args.out)
        emit({"bench": "ingest_median", "latency_ms": latency, "ms_per_completion_token": args.ms_per_completion_token,
              "processes": args.processes, "runs": len(runs),
              "seconds_median": median(r["seconds"] for r in runs),
              **{k: runs[0][k] for k in ("llm_calls", "prompt_tokens", "completion_tokens")}}, args.out)


if __name__ == "__main__":
    main()
