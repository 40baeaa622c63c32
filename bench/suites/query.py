"""Per query mode: submit-to-result seconds (with and without the answer call), context tokens,
LLM calls and tokens, at each simulator latency.

    .venv/bin/python -m bench.suites.query [--latency 0 200] [--repeat 5] [--out bench/results/query.jsonl]
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path

from bench.harness.results import QUERIES, SAMPLE, emit
from bench.harness.stacks import redis_server, simulator, stack
from graphfleet_cli.local_client import LocalClient
from graphfleet_cli.query_client import run_query
from shared.domain.query.params import QueryParam


def bench_latency(latency: float, repeat: int, out: Path | None) -> None:
    with simulator(latency_ms=latency) as llm, redis_server() as redis_url, stack(redis_url, llm, 24):
        client = LocalClient(redis_url)
        view = client.wait("qb", client.ingest_files("qb", [SAMPLE])["job_id"], timeout=1800)
        assert view["status"] == "succeeded", view
        for mode, text in QUERIES.items():
            for only_context in (True, False):
                runs = []
                for i in range(repeat):
                    # a distinct query per run so the LLM cache never answers
                    q = QueryParam(query=f"{text} (run {i})", mode=mode, only_need_context=only_context)
                    runs.append(run_query(client, "qb", q, 300))
                last = runs[-1]
                usage = last["total_usage"] or {}
                emit({
                    "bench": "query", "latency_ms": latency, "mode": mode, "only_need_context": only_context,
                    "runs": repeat, "seconds_median": round(statistics.median(r["seconds"] for r in runs), 4),
                    "context_tokens": (last["budget"] or {}).get("total_tokens"),
                    "llm_calls": usage.get("calls"), "prompt_tokens": usage.get("prompt_tokens"),
                    "completion_tokens": usage.get("completion_tokens"),
                    "by_phase": {k: v.get("calls") for k, v in (last["usage"] or {}).items()},
                    "status": last["status"], "partial": last["partial"],
                }, out)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--latency", type=float, nargs="+", default=[0.0, 200.0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    for latency in args.latency:
        bench_latency(latency, args.repeat, args.out)


if __name__ == "__main__":
    main()
