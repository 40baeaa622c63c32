"""Benchmark ``shared.domain.clustering.hierarchical_leiden`` on seeded power-law graphs, beside graspologic's.

    .venv/bin/python -m bench.suites.clustering [--sizes 10k 100k 500k 100kn-500k] [--repeat 1]
        [--graspologic-python PATH] [--out bench/results/clustering.jsonl]
"""

from __future__ import annotations

import json
import random
import subprocess
import tempfile
from pathlib import Path

import igraph as ig

from bench.harness.results import emit, parser, timed
from shared.domain.clustering import hierarchical_leiden

# name -> (nodes, edges per new node): Barabasi-Albert gives ~nodes * m edges.
SIZES = {"10k": (2_000, 5), "100k": (20_000, 5), "500k": (50_000, 10), "100kn-500k": (100_000, 5)}
RING = [(f"w{i}", f"w{(i + 1) % 30}", 1.0) for i in range(30)]  # an untimed warm-up call's graph, both sides

_GRASPOLOGIC = r"""
import json, sys, time
from collections import Counter
from graspologic.partition import hierarchical_leiden
path, max_size, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
with open(path) as fh:
    edges = [(a, b, float(w)) for a, b, w in (line.rstrip("\n").split("\t") for line in fh)]
hierarchical_leiden([(f"w{i}", f"w{(i + 1) % 30}", 1.0) for i in range(30)], max_cluster_size=max_size,
                    random_seed=seed)
start = time.perf_counter()
rows = hierarchical_leiden(edges, max_cluster_size=max_size, random_seed=seed)
seconds = time.perf_counter() - start
clusters = {(r.level, r.cluster) for r in rows}
final = Counter(r.cluster for r in rows if r.is_final_cluster)
print(json.dumps({"seconds": round(seconds, 3), "levels": dict(sorted(Counter(level for level, _ in clusters).items())),
                  "communities": len(clusters), "leaves_over_max": sum(1 for n in final.values() if n > max_size)}))
"""


def make_graph(name: str, seed: int) -> list[tuple[str, str, float]]:
    """Seeded Barabasi-Albert (power-law) graph as (src, tgt, weight) string edges."""
    n, m = SIZES[name]
    random.seed(seed)  # igraph's generators draw from Python's `random`
    graph = ig.Graph.Barabasi(n, m, outpref=False)
    rng = random.Random(seed)
    return [(f"e{a}", f"e{b}", float(rng.randint(1, 5))) for a, b in graph.get_edgelist()]


def run_ours(edges: list[tuple[str, str, float]], max_size: int, seed: int) -> dict:
    result, seconds = timed(hierarchical_leiden, edges, max_cluster_size=max_size, seed=seed)
    return {"seconds": round(seconds, 3), "levels": result.levels, "communities": len(result.communities),
            "leaves_over_max": sum(1 for c in result.communities if not c.children and len(c.nodes) > max_size)}


def run_graspologic(python: str, edges: list[tuple[str, str, float]], max_size: int, seed: int) -> dict:
    with tempfile.NamedTemporaryFile("w", suffix=".tsv", delete=False) as fh:
        fh.write("".join(f"{a}\t{b}\t{w}\n" for a, b, w in edges))
    try:
        proc = subprocess.run([python, "-c", _GRASPOLOGIC, fh.name, str(max_size), str(seed)], capture_output=True,
                              text=True, check=False)
    finally:
        Path(fh.name).unlink(missing_ok=True)
    if proc.returncode != 0:
        return {"error": proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else f"exit {proc.returncode}"}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _median_of(runs: list[dict]) -> dict:
    """The run with the median seconds, with every run's seconds beside it."""
    ok = sorted((r for r in runs if "seconds" in r), key=lambda r: r["seconds"])
    return {**ok[(len(ok) - 1) // 2], "seconds_all": [r["seconds"] for r in runs if "seconds" in r]} if ok else runs[-1]


def main(argv: list[str] | None = None) -> None:
    ap = parser(__doc__, repeat=1)
    ap.add_argument("--sizes", nargs="+", choices=list(SIZES), default=list(SIZES))
    ap.add_argument("--max-cluster-size", type=int, default=10)
    ap.add_argument("--seed", type=int, default=0xDEADBEEF)
    ap.add_argument("--graspologic-python", help="interpreter with graspologic installed")
    args = ap.parse_args(argv)
    hierarchical_leiden(RING, max_cluster_size=args.max_cluster_size, seed=args.seed)  # first-call costs, untimed
    for name in args.sizes:
        edges = make_graph(name, args.seed)
        nodes = len({n for a, b, _ in edges for n in (a, b)})
        base = {"bench": "clustering", "graph": f"barabasi-{name}", "nodes": nodes, "edges": len(edges),
                "runs": args.repeat}
        ours = _median_of([run_ours(edges, args.max_cluster_size, args.seed) for _ in range(args.repeat)])
        emit({**base, "impl": "graphfleet", **ours}, args.out)
        if args.graspologic_python:
            theirs = _median_of([run_graspologic(args.graspologic_python, edges, args.max_cluster_size, args.seed)
                                 for _ in range(args.repeat)])
            emit({**base, "impl": "graspologic", **theirs}, args.out)


if __name__ == "__main__":
    main()
