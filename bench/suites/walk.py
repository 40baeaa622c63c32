"""Cost of the graph walk (``shared.domain.retrieval.graph_walk``) at 10k and 100k passages (or any size).

    .venv/bin/python -m bench.suites.walk [--passages 10000 100000] [--queries 50] --out bench/results/walk.jsonl

A synthetic passage-entity graph shaped like the ingested dev sets: ~8 entity mentions per passage, 30% of
them drawn from a Zipf law (a few names recur in thousands of passages), the rest uniform over 6 entities per
passage, and ~3 relations per entity. Each query seeds 3 entities and 5 passages. Reported: build seconds, memory,
the snapshot a cold worker loads instead (``index_codec``: MiB, decode s) and per-query ms (p50, p95) of the walk.
"""

from __future__ import annotations

import numpy as np

from bench.harness.results import emit, machine, median, parser, timed
from bench.harness.synthetic_graph import synthetic
from shared.domain.retrieval.walk_build import build_walk
from shared.infra.store.index_codec import walk_from_bytes, walk_to_bytes


def main() -> None:
    ap = parser(__doc__)
    ap.add_argument("--passages", type=int, nargs="+", default=[10_000, 100_000])
    ap.add_argument("--queries", type=int, default=50)
    args = ap.parse_args()
    emit({"bench": "machine", **machine()}, args.out)
    rng = np.random.default_rng(11)
    for n in args.passages:
        pids, sources, edges = synthetic(n)
        index, build_s = timed(build_walk, pids, sources, edges)
        names, times, snapshot = index.entities, [], walk_to_bytes(index)
        load_s = timed(walk_from_bytes, snapshot)[1]
        for _ in range(args.queries):
            ents = [(names[i], 1.0) for i in rng.integers(0, len(names), size=3)]
            seeds = [(pids[i], 1.0) for i in rng.integers(0, n, size=5)]
            times.append(1000 * timed(index.walk, ents, seeds, top_k=200)[1])
        times.sort()
        emit({"bench": "walk", "passages": n, "entities": len(names), "edges": index.edge_count,
              "build_s": round(build_s, 2), "arrays_mb": round(index.nbytes / 2**20, 1),
              "snapshot_mb": round(len(snapshot) / 2**20, 1), "snapshot_load_s": round(load_s, 2),
              "query_ms_p50": median(times, 1),
              "query_ms_p95": round(times[int(0.95 * (len(times) - 1))], 1), "queries": args.queries}, args.out)


if __name__ == "__main__":
    main()
