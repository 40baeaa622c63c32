"""Render bench/results/*.jsonl into docs/benchmarks.md.

    .venv/bin/python -m bench.make_report

The comparison tables are in ``bench.report_compare``, the earlier retrieval tables in
``bench.report_retrieval`` and the multi-set retrieval tables in ``bench.report_retrieval_sets``.
"""

from __future__ import annotations

import platform

from bench.report_common import RESULTS, ROOT, fmt_ratio, load_results, newest
from bench.report_compare import by_stage, compare_tables
from bench.report_cost import cost_section
from bench.report_retrieval import retrieval_runs, retrieval_table
from bench.report_retrieval_sets import sets_tables
from bench.walk_bench import walk_table

__all__ = ["by_stage", "clustering_table", "compare_tables", "ingest_table", "main", "query_table", "render",
           "retrieval_runs", "retrieval_table", "scaling_table"]

NANO_REFERENCE = {0.0: 2.3, 200.0: 4.5}  # seconds, nano-graphrag on this machine (issue reference)


def ingest_table(rows: list[dict]) -> list[str]:
    medians = newest([r for r in rows if r["bench"] == "ingest_median"], "latency_ms", "processes")
    runs = [r for r in rows if r["bench"] == "ingest"]
    out = ["| simulator latency | worker processes per group | runs | wall s (median) | nano-graphrag s (reference) "
           "| ratio | LLM calls by stage "
           "| prompt tokens | completion tokens | entities | relations | communities by level | reports |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for m in medians:
        procs = m.get("processes", 1)
        run = [r for r in runs if r["latency_ms"] == m["latency_ms"] and r.get("processes", 1) == procs][-1]
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
    for r in newest([r for r in rows if r["bench"] == "query"], "latency_ms", "mode", "only_need_context"):
        out.append(f"| {r['latency_ms']:.0f} ms | {r['mode']} | {r['only_need_context']} | {r['seconds_median']:.3f} "
                   f"| {r['context_tokens']} | {r['llm_calls']} | {r['by_phase']} | {r['prompt_tokens']} "
                   f"| {r['completion_tokens']} |")
    return out


def scaling_table(rows: list[dict]) -> list[str]:
    med = newest([r for r in rows if r["bench"] == "scaling_median"], "corpus", "processes", "latency_ms")
    runs = [r for r in rows if r["bench"] == "scaling"]
    if not med:
        return ["(no results yet: `.venv/bin/python -m bench.scaling_bench --out bench/results/scaling.jsonl`)", ""]
    out = ["| corpus | simulator latency | documents | tokens | chunks | worker processes per queue group "
           "| wall s (median) | chunks/s | speed-up vs 1 process | LLM calls | entities | relations |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    med.sort(key=lambda m: (m["corpus"] != "carol", m["corpus"], m["latency_ms"], m["processes"]))
    for m in med:
        same = [x for x in med if (x["corpus"], x["latency_ms"]) == (m["corpus"], m["latency_ms"])]
        one = next((x for x in same if x["processes"] == 1), None)
        run = [r for r in runs if (r["corpus"], r["processes"], r["latency_ms"])
               == (m["corpus"], m["processes"], m["latency_ms"])][-1]
        speedup = f"{m['chunks_per_s_median'] / one['chunks_per_s_median']:.2f}" if one else "-"
        out.append(f"| {m['corpus']} | {m['latency_ms']:.0f} ms | {m['documents']} | {m['tokens']:,} | {m['chunks']} "
                   f"| {m['processes']} "
                   f"| {m['seconds_median']:.1f} | {m['chunks_per_s_median']:.1f} | {speedup} | {run['llm_calls']:,} "
                   f"| {run['entities']:,} | {run['relations']:,} |")
    return out + [""]


def clustering_table(rows: list[dict]) -> list[str]:
    rows = [r for r in rows if r.get("bench") == "clustering"]
    if not rows:
        return ["(no results yet: `.venv/bin/python bench/clustering_bench.py --repeat 3 --graspologic-python "
                ".bench/peers-venv/bin/python --out bench/results/clustering.jsonl`)", ""]
    out = ["| graph | nodes | edges | graphfleet s (median) | graspologic s (median) | graphfleet/graspologic "
           "| communities per level (graphfleet) | communities per level (graspologic) |",
           "|---|---|---|---|---|---|---|---|"]
    latest = {(r["graph"], r["impl"]): r for r in rows}
    for graph in dict.fromkeys(r["graph"] for r in rows):
        ours, theirs = latest.get((graph, "graphfleet")), latest.get((graph, "graspologic"))
        if not ours:
            continue
        t = theirs or {}
        out.append(f"| {graph} | {ours['nodes']:,} | {ours['edges']:,} | {ours['seconds']:.3f} "
                   f"| {t.get('seconds', '-')} | {fmt_ratio(ours['seconds'], t.get('seconds'))} "
                   f"| {'/'.join(str(v) for v in ours['levels'].values())} "
                   f"| {'/'.join(str(v) for v in (t.get('levels') or {}).values()) or '-'} |")
    return out + [""]


def machine_line() -> str:
    """The newest machine record of any results file (they are written by the benchmarks themselves)."""
    found = [r for name in ("compare.jsonl", "retrieval.jsonl", "scaling.jsonl") for r in load_results(name)
             if r["bench"] == "machine" and r.get("cpu_model")]
    if not found:
        return f"Machine: {platform.machine()}, 2 cores, Python {platform.python_version()}."
    m = found[-1]
    return (f"Machine: {m['cpus']} cores ({m['cpu_model']}, {m['arch']}), {m['memory_gib']} GiB, Linux {m['kernel']}, "
            f"Python {m['python']}.")


def _notes(name: str) -> list[str]:
    """A hand-written results file (what the figures mean), when there is one."""
    path = RESULTS / name
    return [*path.read_text().splitlines(), ""] if path.exists() else []


def render() -> str:
    """docs/benchmarks.md as the results and the hand-written notes (``bench/results/*_notes.md``) make it."""
    ingest, query = load_results("ingest.jsonl"), load_results("query.jsonl")
    lines = [
        "# Benchmarks", "",
        f"{machine_line()} Figures on a shared "
        "machine are noisy: each row is a median of repeated runs. LLM = the project's simulator over HTTP "
        "(`graphfleet llm-simulator`), deterministic, the same for every system measured.", "",
        "Everything below: `bash bench/compare.sh` (installs nano-graphrag and LightRAG into `.bench/peers-venv`, "
        "runs every benchmark, rewrites this file with `.venv/bin/python -m bench.make_report`).", "",
        "## graphfleet vs nano-graphrag vs LightRAG (A Christmas Carol)", "",
        "`.venv/bin/python -m bench.compare --repeat 3 --out bench/results/compare.jsonl`", "",
        *compare_tables(load_results("compare.jsonl")),
        *_notes("compare_notes.md"),
        *cost_section(load_results("cost_table.jsonl")),
        *_notes("cost_notes.md"),
        "## Retrieval quality under a token budget", "",
        "`.venv/bin/python -m bench.retrieval_eval --llm both --out bench/results/retrieval.jsonl` on every "
        "public multi-hop dev set of `../shared/data` (HotpotQA `hotpotqa_hipporag100`: 100 questions, 994 pooled "
        "passages; MuSiQue `musique_dev`: 292 / 4,543; 2WikiMultihopQA `2wikimultihopqa_dev`: 164 / 1,294; "
        "`hoprag_quickstart`: 30 / 399), each ingested into its own fresh stack: the share of gold supporting "
        "passages whose whole text is in the context built with `only_need_context` under a 4,000-token budget "
        "(cl100k), and the share of questions whose gold answer (or an alias) is in it as whole words "
        "(answer-in-context; yes/no questions not counted), so a graph row that carries the answer counts as a "
        "passage does. The baselines rank whole passages without a graph (BM25; dense: cosine with the local "
        "embedder; the hybrid baseline: the two fused by z-score, BM25 weight 0.5) and pack them, best first, into "
        "the largest context allowance (`budget.total_allowed`: the budget less system prompt, query and buffer) "
        "any passage-carrying mode got for the same question (same allowance); BM25 also into the whole budget. "
        "Per-question records (gold passages' candidate ranks, kept or not, tokens per section, answer in "
        "context) are written to `bench/results/retrieval.questions.jsonl` by the run (not kept in git: 13 MB).", "",
        *sets_tables(load_results("retrieval.jsonl")),
        *_notes("retrieval_notes.md"),
        *(["### HotpotQA only, with nano-graphrag and LightRAG (earlier runs)", "",
            "`.venv/bin/python -m bench.retrieval_eval --systems graphfleet nano lightrag` before the multi-set "
            "runs: BM25 there got the whole budget.", "", *old]
          if (old := retrieval_table(load_results("retrieval.jsonl"))) else []),
        "### What the graph walk costs per query", "",
        "`.venv/bin/python -m bench.walk_bench --out bench/results/walk.jsonl`: a synthetic passage-entity graph "
        "like the ingested dev sets (~8 entity mentions per passage, a Zipf tail of common names, ~3 relations "
        "per entity); the walk alone (personalized PageRank by power iteration, seeds -> ranked passages), 50 "
        "queries. It grows with the edges; the index is built once per graph version per query-worker process.", "",
        *walk_table(newest([r for r in load_results("walk.jsonl") if r.get("bench") == "walk"], "passages")),
        "## Scaling (graphfleet)", "",
        "`.venv/bin/python -m bench.scaling_bench --out bench/results/scaling.jsonl` (simulator at 0 ms; "
        "`--latency 200` for the 200 ms rows; on 2 cores the simulator, Redis and every worker process share "
        "the same two CPUs).", "",
        *scaling_table(load_results("scaling.jsonl")),
        "## graphfleet ingestion detail", "",
        "`.venv/bin/python -m bench.ingest_bench --repeat 5 [--processes 2] --out bench/results/ingest.jsonl`", "",
        *ingest_table(ingest), "",
        "## graphfleet queries detail", "", "`.venv/bin/python -m bench.query_bench --repeat 3 --out "
        "bench/results/query.jsonl`", "",
        "Submit-to-result through the gateway-less path (Redis queue -> query worker -> Redis), the client woken "
        "by the job's end-of-job message (rows measured before that change polled every <= 50 ms).", "",
        *query_table(query), "",
        "## Clustering: hierarchical Leiden vs graspologic", "",
        "`.venv/bin/python bench/clustering_bench.py --repeat 3 --graspologic-python .bench/peers-venv/bin/python "
        "--out bench/results/clustering.jsonl`: seeded Barabasi-Albert graphs, `max_cluster_size=10`, weights 1-5; "
        "only the clustering call is timed on both sides (graspologic is the one nano-graphrag installs).", "",
        *clustering_table(load_results("clustering.jsonl")),
    ]
    return "\n".join(lines)


def main() -> None:
    text = render()
    (ROOT / "docs" / "benchmarks.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
