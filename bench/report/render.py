"""docs/benchmarks.md: the tables rendered from bench/results and, after each, its reading (bench/report/notes).

    .venv/bin/python -m bench.report
"""

from __future__ import annotations

import platform
from pathlib import Path

from bench.report.capacity import capacity_section
from bench.report.common import ROOT, load_results, newest
from bench.report.compare import compare_tables
from bench.report.cost import cost_section
from bench.report.retrieval import retrieval_table
from bench.report.retrieval_sets import sets_tables
from bench.report.tables import clustering_table, ingest_table, query_table, scaling_table, walk_table

NOTES = Path(__file__).parent / "notes"


def machine_line() -> str:
    """The newest machine record of any results file (they are written by the suites themselves)."""
    found = [r for name in ("compare.jsonl", "retrieval.jsonl", "scaling.jsonl") for r in load_results(name)
             if r["bench"] == "machine" and r.get("cpu_model")]
    if not found:
        return f"Machine: {platform.machine()}, 2 cores, Python {platform.python_version()}."
    m = found[-1]
    return (f"Machine: {m['cpus']} cores ({m['cpu_model']}, {m['arch']}), {m['memory_gib']} GiB, Linux {m['kernel']}, "
            f"Python {m['python']}.")


def note(name: str) -> list[str]:
    """A hand-written reading of the tables before it (``bench/report/notes/<name>.md``)."""
    return [*(NOTES / f"{name}.md").read_text().splitlines(), ""]


def render() -> str:
    walks = newest([r for r in load_results("walk.jsonl") if r.get("bench") == "walk"], "passages")
    lines = [
        "# Benchmarks", "",
        f"{machine_line()} Figures on a shared machine are noisy: each row is a median of repeated runs. LLM = the "
        "project's simulator over HTTP (`graphfleet llm-simulator`), deterministic, the same for every system "
        "measured. How to run each suite: [bench/README.md](../bench/README.md); `bash bench/compare.sh` runs them "
        "all and rewrites this file with `.venv/bin/python -m bench.report`.", "",
        "## graphfleet vs nano-graphrag vs LightRAG (A Christmas Carol)", "",
        "`.venv/bin/python -m bench.suites.compare --repeat 3 --out bench/results/compare.jsonl`", "",
        *compare_tables(load_results("compare.jsonl")), *note("compare"),
        *cost_section(load_results("cost_table.jsonl")), *note("cost"),
        *note("warmups"),
        "## Retrieval quality under a token budget", "",
        "`.venv/bin/python -m bench.suites.retrieval --llm both --out bench/results/retrieval.jsonl` on every "
        "public multi-hop dev set of `../shared/data` (HotpotQA `hotpotqa_hipporag100`: 100 questions, 994 pooled "
        "passages; MuSiQue `musique_dev`: 292 / 4,543; 2WikiMultihopQA `2wikimultihopqa_dev`: 164 / 1,294; "
        "`hoprag_quickstart`: 30 / 399), each ingested into its own fresh stack: the share of gold supporting "
        "passages whose whole text is in the context built with `only_need_context` under a 4,000-token budget "
        "(cl100k), and the share of questions whose gold answer (or an alias) is in it as whole words "
        "(answer-in-context; yes/no questions not counted). The baselines rank whole passages without a graph "
        "(BM25; dense: cosine with the local embedder; the hybrid baseline: the two fused by z-score, BM25 weight "
        "0.5) and pack them, best first, into the largest context allowance (`budget.total_allowed`) any "
        "passage-carrying mode got for the same question (same allowance); BM25 also into the whole budget. "
        "Per-question records go to `bench/results/retrieval.questions.jsonl` (not kept in git).", "",
        *sets_tables(load_results("retrieval.jsonl")), *note("retrieval"),
        *(["### HotpotQA only, with nano-graphrag and LightRAG (earlier runs)", "",
           "`.venv/bin/python -m bench.suites.retrieval --sets hotpotqa --systems graphfleet nano lightrag` before "
           "the multi-set runs: BM25 there got the whole budget.", "", *old, *note("retrieval_peers")]
          if (old := retrieval_table(load_results("retrieval.jsonl"))) else []),
        "### What the graph walk costs per query", "",
        "`.venv/bin/python -m bench.suites.walk --out bench/results/walk.jsonl`: a synthetic passage-entity graph "
        "like the ingested dev sets (~8 entity mentions per passage, a Zipf tail of common names, ~3 relations "
        "per entity); the walk alone (personalized PageRank, seeds -> ranked passages), 50 queries; the index is "
        "built once per graph version per query-worker process. The rows below are the former power iteration, "
        "whose cost grew with the edges. The walk is now a forward push (epsilon 1e-5 per unit of degree) whose "
        "work is bounded whatever the graph's size: measured once on a machine at load 25-30 (2026-12-02), at "
        "100,000 passages it took 6.1 ms of CPU per query (p50; 68.6 ms wall) against 1,057 ms of CPU for the "
        "power iteration measured the same way. Quiet-machine rows and the 1,000,000-passage row are still to be "
        "run.", "",
        *walk_table(walks),
        "## Scaling (graphfleet)", "",
        "`.venv/bin/python -m bench.suites.scaling --out bench/results/scaling.jsonl` (simulator at 0 ms; "
        "`--latency 200` for the 200 ms rows; on 2 cores the simulator, Redis and every worker process share "
        "the same two CPUs).", "",
        *scaling_table(load_results("scaling.jsonl")), *note("scaling"),
        *capacity_section(load_results("capacity.jsonl"), load_results("capacity_after_fix.jsonl")),
        *note("capacity"),
        "## graphfleet ingestion detail", "",
        "`.venv/bin/python -m bench.suites.ingest --repeat 5 [--processes 2] --out bench/results/ingest.jsonl`", "",
        *ingest_table(load_results("ingest.jsonl")), "",
        "## graphfleet queries detail", "",
        "`.venv/bin/python -m bench.suites.query --repeat 3 --out bench/results/query.jsonl`: submit-to-result "
        "through the gateway-less path (Redis queue -> query worker -> Redis), the client woken by the job's "
        "end-of-job message.", "",
        *query_table(load_results("query.jsonl")), "",
        "## Clustering: hierarchical Leiden vs graspologic", "",
        "`.venv/bin/python -m bench.suites.clustering --repeat 3 --graspologic-python .bench/peers-venv/bin/python "
        "--out bench/results/clustering.jsonl`: seeded Barabasi-Albert graphs, `max_cluster_size=10`, weights 1-5; "
        "only the clustering call is timed on both sides (graspologic is the one nano-graphrag installs).", "",
        *clustering_table(load_results("clustering.jsonl")), *note("clustering"),
    ]
    return "\n".join(lines)


def main() -> None:
    text = render()
    (ROOT / "docs" / "benchmarks.md").write_text(text)
    print(text)
