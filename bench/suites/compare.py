"""Side by side: graphfleet, nano-graphrag and LightRAG on one corpus against one LLM simulator.

    .venv/bin/python -m bench.suites.compare [--latency 0 200] [--repeat 3] [--systems graphfleet nano lightrag]
        [--corpus FILE] [--peers-python PATH] [--out bench/results/compare.jsonl]
"""

from __future__ import annotations

import sys

from bench.harness.results import PEERS_PYTHON, SAMPLE, emit, machine, own_versions, parser
from bench.harness.stacks import simulator
from bench.harness.systems import EMBEDDING_DIM, MODEL, MODES, medians, peer_versions, run_system, schedule


def main() -> None:
    ap = parser(__doc__, latency=[0.0, 200.0], repeat=3, corpus=SAMPLE, concurrency=16, processes=1,
                peers_python=PEERS_PYTHON, ms_per_completion_token=0.0)
    ap.add_argument("--warmup", type=int, default=1, help="unmeasured rounds first (the simulator's caches)")
    ap.add_argument("--systems", nargs="+", default=list(MODES), choices=list(MODES))
    args = ap.parse_args()
    versions = peer_versions(args.peers_python) if set(args.systems) - {"graphfleet"} else {}
    emit({"bench": "machine", **machine(), "corpus": args.corpus.name, "repeat": args.repeat, "warmup": args.warmup,
          "concurrency": args.concurrency, "model": MODEL, "embedding_dim": EMBEDDING_DIM, "versions": versions,
          "graphfleet_versions": own_versions(),
          "command": "python -m bench.suites.compare " + " ".join(sys.argv[1:])}, args.out)
    rows: list[dict] = []
    for latency in args.latency:
        with simulator(latency_ms=latency, ms_per_completion_token=args.ms_per_completion_token) as llm:
            for run, system, warm in schedule(args.systems, args.repeat, args.warmup):
                recs = run_system(system, llm, args.corpus, latency, run, warm, args, args.concurrency,
                                  args.processes)
                emit(recs, args.out)
                rows += recs
    emit(medians(rows), args.out)


if __name__ == "__main__":
    main()
