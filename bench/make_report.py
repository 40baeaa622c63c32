"""Render bench/results/*.jsonl into docs/benchmarks.md.

    .venv/bin/python -m bench.make_report
"""

from __future__ import annotations

import json
import platform
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
NANO_REFERENCE = {0.0: 2.3, 200.0: 4.5}  # seconds, nano-graphrag on this machine (issue reference)


def _load(name: str) -> list[dict]:
    path = RESULTS / name
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []


def ingest_table(rows: list[dict]) -> list[str]:
    medians = [r for r in rows if r["bench"] == "ingest_median"]
    runs = [r for r in rows if r["bench"] == "ingest"]
    out = ["| simulator latency | worker processes per group | runs | wall s (median) | nano-graphrag s (reference) "
           "| ratio | LLM calls by stage "
           "| prompt tokens | completion tokens | entities | relations | communities by level | reports |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for m in medians:
        procs = m.get("processes", 1)
        run = next(r for r in runs if r["latency_ms"] == m["latency_ms"] and r.get("processes", 1) == procs)
        nano = NANO_REFERENCE.get(m["latency_ms"])
        ratio = f"{m['seconds_median'] / nano:.2f}" if nano else "-"
        out.append(f"| {m['latency_ms']:.0f} ms | {procs} | {m['runs']} | {m['seconds_median']:.2f} | {nano or '-'} "
                   f"| {ratio} "
                   f"| {run['calls_by_stage']} | {m['prompt_tokens']:,} | {m['completion_tokens']:,} "
                   f"| {run['entities']} | {run['relations']} | {run['communities_by_level']} | {run['reports']} |")
    return out


def query_table(rows: list[dict]) -> list[str]:
    out = ["| latency | mode | only context | s (median) | context tokens | LLM calls | calls by phase "
           "| prompt tokens | completion tokens |", "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        out.append(f"| {r['latency_ms']:.0f} ms | {r['mode']} | {r['only_need_context']} | {r['seconds_median']:.3f} "
                   f"| {r['context_tokens']} | {r['llm_calls']} | {r['by_phase']} | {r['prompt_tokens']} "
                   f"| {r['completion_tokens']} |")
    return out


def retrieval_table(rows: list[dict]) -> list[str]:
    """The newest run per LLM setting: ingest line, then one row per mode."""
    out = []
    runs: list[list[dict]] = []
    for r in rows:
        if r["bench"] == "machine":
            runs.append([])
        elif runs:
            runs[-1].append(r)
    latest: dict[bool, list[dict]] = {}
    for run in runs:
        ingest = next((r for r in run if r["bench"] == "retrieval_ingest"), None)
        if ingest and any(r["bench"] == "retrieval_summary" for r in run):
            latest[ingest["llm"]] = run
    for llm, run in sorted(latest.items()):
        ingest = next(r for r in run if r["bench"] == "retrieval_ingest")
        summary = next(r for r in run if r["bench"] == "retrieval_summary")
        out += [f"**{'LLM simulator (0 ms)' if llm else 'no LLM (LLM-free extraction, hashing embeddings)'}**: "
                f"{ingest['passages']} passages ingested in {ingest['seconds']} s ({ingest['llm_calls']} LLM calls; "
                f"{ingest['entities']} entities, {ingest['relations']} relations); {summary['questions']} questions, "
                f"budget {summary['budget']} tokens ({summary['budget_encoding']}).", "",
                "| mode | gold passages in context (mean) | questions with all gold passages | context tokens (median) "
                "| s per query (median) |", "|---|---|---|---|---|"]
        for r in run:
            if r["bench"] == "retrieval_mode":
                secs = "-" if r["seconds_median"] is None else f"{r['seconds_median']:.3f}"
                out.append(f"| {r['mode']} | {r['recall_mean']:.2f} | {r['all_gold_share']:.2f} "
                           f"| {r['context_tokens_median']} | {secs} |")
        out.append("")
    return out


def main() -> None:
    ingest, query = _load("ingest.jsonl"), _load("query.jsonl")
    lines = [
        "# Benchmarks", "",
        f"Machine: {platform.machine()}, 2 cores, Python {platform.python_version()}. Figures on a shared "
        "machine are noisy: each row is a median of repeated runs. LLM = the project's simulator over HTTP "
        "(`graphfleet llm-simulator`), corpus = the bundled *A Christmas Carol* (42 chunks of 1200 tokens).", "",
        "## Ingestion", "",
        "`.venv/bin/python -m bench.ingest_bench --repeat 5 [--processes 2] --out bench/results/ingest.jsonl`", "",
        *ingest_table(ingest), "",
        "## Queries", "", "`.venv/bin/python -m bench.query_bench --repeat 3 --out bench/results/query.jsonl`", "",
        "Submit-to-result through the gateway-less path (Redis queue -> query worker -> Redis), polled by the "
        "client every <= 50 ms.", "", *query_table(query), "",
        "## Retrieval quality under a token budget", "",
        "`.venv/bin/python -m bench.retrieval_eval [--no-llm] --out bench/results/retrieval.jsonl` on "
        "`../shared/data/hotpotqa_hipporag100` (HotpotQA, 100 questions, 994 pooled passages): the share of gold "
        "supporting passages whose whole text is in the context built with `only_need_context`. Peers "
        "(nano-graphrag, LightRAG) are not measured yet.", "",
        *retrieval_table(_load("retrieval.jsonl")),
        "## Clustering", "", "See `bench/README.md` (hierarchical Leiden vs graspologic).", "",
    ]
    (ROOT / "docs" / "benchmarks.md").write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
