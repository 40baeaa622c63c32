"""Side by side: graphfleet, nano-graphrag and LightRAG on one corpus against one LLM simulator.

    .venv/bin/python -m bench.suites.compare [--latency 0 200] [--repeat 3] [--systems graphfleet nano lightrag]
        [--corpus FILE] [--peers-python PATH] [--out bench/results/compare.jsonl]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from bench.harness.results import SAMPLE, emit, machine, own_versions
from bench.harness.stacks import simulator
from bench.harness.systems import EMBEDDING_DIM, MODEL, MODES, PEERS_VENV, medians, peer_versions, run_system, schedule


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--latency", type=float, nargs="+", default=[0.0, 200.0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=1, help="unmeasured rounds first (the simulator's caches)")
    ap.add_argument("--systems", nargs="+", default=list(MODES), choices=list(MODES))
    ap.add_argument("--corpus", type=Path, default=SAMPLE)
    ap.add_argument("--concurrency", type=int, default=16, help="LLM calls in flight per system")
    ap.add_argument("--processes", type=int, default=1, help="graphfleet worker processes per queue group")
    ap.add_argument("--peers-python", default=str(PEERS_VENV / "bin" / "python"))
    ap.add_argument("--ms-per-completion-token", type=float, default=0.0,
                    help="simulated generation time per completion token, for every system (12.5: ~80 tokens/s)")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    peers = [s for s in args.systems if s != "graphfleet"]
    versions = peer_versions(args.peers_python) if peers else {}
    emit({"bench": "machine", **machine(), "corpus": args.corpus.name, "repeat": args.repeat, "warmup": args.warmup,
          "concurrency": args.concurrency, "model": MODEL, "embedding_dim": EMBEDDING_DIM, "versions": versions,
          "graphfleet_versions": own_versions(),
          "command": "python -m bench.suites.compare " + " ".join(sys.argv[1:])}, args.out)
    rows: list[dict] = []
    for latency in args.latency:
        with simulator(latency_ms=latency, ms_per_completion_token=args.ms_per_completion_token) as llm:
            for run, system, warm in schedule(args.systems, args.repeat, args.warmup):
                recs = run_system(system, llm, args.corpus, latency, run, warm, args, args.concurrency)
                for r in recs:
                    emit(r, args.out)
                rows += recs
    for m in medians(rows):
        emit(m, args.out)


if __name__ == "__main__":
    main()
