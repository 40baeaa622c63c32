"""Compare ingest_bench and query_bench runs of two checkouts (a refactor must not move the figures).

    .venv/bin/python -m bench.before_after bench/results/issue17 [--before base --after main]

Reads ``{side}_{round}_ingest.jsonl`` and ``{side}_{round}_query.jsonl`` (as written by
``bench/results/issue17/run.sh``, which alternates the two checkouts round by round) and prints, per
latency, the median ingestion seconds over every run of each side, and the query seconds summed over
modes per round, with the change in percent. LLM calls and tokens are printed too: they must be equal.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path


def load(folder: Path, side: str, kind: str) -> list[dict]:
    rows = []
    for path in sorted(folder.glob(f"{side}_*_{kind}.jsonl")):
        rows += [dict(json.loads(line), round=path.name.split("_")[1]) for line in path.read_text().splitlines()
                 if line.strip()]
    return [r for r in rows if r["bench"] != "machine"]


def ingest_lines(folder: Path, before: str, after: str) -> list[str]:
    out = ["ingest: seconds per run, median over all runs (5 per round)"]
    for latency in sorted({r["latency_ms"] for r in load(folder, before, "ingest")}):
        med, work = {}, {}
        for side in (before, after):
            rows = [r for r in load(folder, side, "ingest") if r["latency_ms"] == latency]
            med[side] = statistics.median(r["seconds"] for r in rows if r["bench"] == "ingest")
            work[side] = sorted({(r["llm_calls"], r["prompt_tokens"], r["completion_tokens"]) for r in rows
                                 if r["bench"] == "ingest_median"})
        change = 100 * (med[after] / med[before] - 1)
        out.append(f"  {latency:g} ms: {before} {med[before]:.3f} s, {after} {med[after]:.3f} s ({change:+.1f}%); "
                   f"LLM calls/prompt/completion tokens {work[before]} vs {work[after]}")
    return out


def query_lines(folder: Path, before: str, after: str) -> list[str]:
    out = ["query: seconds (median of 3 per mode and latency) summed over the 20 cases, per round"]
    sums = {}
    for side in (before, after):
        rows = [r for r in load(folder, side, "query") if r["bench"] == "query"]
        sums[side] = [round(sum(r["seconds_median"] for r in rows if r["round"] == rnd), 3)
                      for rnd in sorted({r["round"] for r in rows})]
        tokens = sorted({(r["mode"], r["context_tokens"]) for r in rows})
        out.append(f"  {side}: {sums[side]}; context tokens per mode {tokens}")
    change = 100 * (statistics.mean(sums[after]) / statistics.mean(sums[before]) - 1)
    out.append(f"  change of the mean: {change:+.1f}%")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folder", type=Path)
    ap.add_argument("--before", default="base")
    ap.add_argument("--after", default="main")
    a = ap.parse_args()
    print("\n".join(ingest_lines(a.folder, a.before, a.after) + query_lines(a.folder, a.before, a.after)))


if __name__ == "__main__":
    main()
