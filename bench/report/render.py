"""docs/benchmarks.md: the tables rendered from bench/results between the hand-written parts (bench/report/notes).

    .venv/bin/python -m bench.report
"""

from __future__ import annotations

import platform

from bench.report.capacity import capacity_section
from bench.report.common import ROOT, load_results, newest, note
from bench.report.compare import compare_tables
from bench.report.cost import cost_section
from bench.report.retrieval_sets import sets_tables
from bench.report.tables import clustering_table, scaling_table, walk_table


def machine_line() -> str:
    """The newest machine record of any results file (they are written by the suites themselves)."""
    found = [r for name in ("compare.jsonl", "retrieval.jsonl", "scaling.jsonl") for r in load_results(name)
             if r["bench"] == "machine" and r.get("cpu_model")]
    if not found:
        return f"Machine: {platform.machine()}, 2 cores, Python {platform.python_version()}."
    m = found[-1]
    return (f"Machine: {m['cpus']} cores ({m['cpu_model']}, {m['arch']}), {m['memory_gib']} GiB, Linux {m['kernel']}, "
            f"Python {m['python']}.")


def render() -> str:
    walks = newest([r for r in load_results("walk.jsonl") if r.get("bench") == "walk"], "passages")
    lines = [
        "# Benchmarks", "",
        f"{machine_line()} Figures on a shared machine are noisy: each row is a median of repeated runs. LLM = the "
        "project's simulator over HTTP (`graphfleet llm-simulator`), deterministic, the same for every system "
        "measured. How to run each suite: [bench/README.md](../bench/README.md); `bash bench/compare.sh` runs them "
        "all and rewrites this file with `.venv/bin/python -m bench.report`.", "",
        *note("compare_head"), *compare_tables(load_results("compare.jsonl")), *note("compare"),
        *cost_section(load_results("cost_table.jsonl")), *note("cost"), *note("warmups"),
        *note("retrieval_head"), *sets_tables(load_results("retrieval.jsonl")), *note("retrieval"),
        *note("retrieval_peers"),
        *note("walk_head"), *walk_table(walks),
        *note("scaling_head"), *scaling_table(load_results("scaling.jsonl")), *note("scaling"),
        *capacity_section(load_results("capacity.jsonl"), load_results("capacity_after_fix.jsonl")),
        *note("capacity"),
        *note("clustering_head"), *clustering_table(load_results("clustering.jsonl")), *note("clustering"),
    ]
    return "\n".join(lines)


def main() -> None:
    text = render()
    (ROOT / "docs" / "benchmarks.md").write_text(text)
    print(text)
