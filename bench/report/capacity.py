"""The capacity suite's tables (``bench.suites.capacity`` records): the section of docs/benchmarks.md, and every
table of one results file on stdout.

    .venv/bin/python -m bench.report.capacity [bench/results/capacity.jsonl]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from bench.report.common import RESULTS, md_table

STAGE_GROUPS = ["submit", "chunk", "extract", "merge", "index+cluster", "report", "finalize"]
WRAPPERS = ("exec", "eval", "evalsha")  # their time includes the commands they run (counted under their own names)


def stage_group(segment: str) -> str:
    """The stage a segment is charged to: its last stage when several started between two reads of the job
    (``chunk+extract`` is mostly extraction)."""
    last = segment.split("+")[-1]
    if last in ("index", "cluster"):
        return "index+cluster"
    if last.startswith("report") or last == "index_done":
        return "report"
    return last if last in STAGE_GROUPS else "finalize"


def label(r: dict) -> str:
    return f"{r['chunks']:,} ({r['extraction']})"


def fam(r: dict, name: str, level: str = "families") -> int:
    return r["families"][level].get(name, {}).get("bytes", 0)


def per(value: float, n: int, digits: int = 0) -> str:
    return f"{value / n:,.{digits}f}" if n else "-"


def runs_table(rows: list[dict]) -> list[str]:
    out = []
    for r in rows:
        grown = r["memory_after_ingest"]["used_memory"] - r["memory_before"]["used_memory"]
        out.append([label(r), r["documents"], f"{r['corpus_tokens']:,}", r["renamed_copies"], f"{r['entities']:,}",
                    f"{r['relations']:,}", f"{r['communities']:,}", r["seconds"], per(r["chunks"], r["seconds"], 1),
                    f"{grown / 2**20:,.1f}", per(grown, r["chunks"])])
    return md_table(["chunks (extraction)", "docs", "tokens", "renamed copies", "entities", "relations", "communities",
                  "ingest s", "chunks/s", "used_memory grew MiB", "bytes/chunk all-in"], out)


def memory_table(rows: list[dict]) -> list[str]:
    out = []
    for r in rows:
        n, v = r["chunks"], r["vectors"]
        vec = {kind: fam(r, f"vec:{kind}", "subfamilies") + fam(r, f"vecmeta:{kind}", "subfamilies")
               for kind in ("entities", "chunks")}
        out.append([label(r), per(fam(r, "chunks"), n), per(fam(r, "documents"), n), per(fam(r, "extractions"), n),
                    per(fam(r, "entities"), r["entities"]), per(fam(r, "relations"), r["relations"]),
                    per(vec["entities"], v.get("entities", 0)), per(vec["chunks"], v.get("chunks", 0)),
                    per(fam(r, "communities"), r["communities"]), per(fam(r, "llm_cache"), n),
                    per(fam(r, "jobs") + fam(r, "usage"), n)])
    return md_table(["chunks (extraction)", "chunk", "doc text /chunk", "extraction record /chunk", "entity",
                  "relation", "entity vector", "chunk vector", "community (+report)", "LLM cache /chunk",
                  "job + usage /chunk"], out)


def ops_table(rows: list[dict]) -> list[str]:
    out = []
    for r in rows:
        ops, cpu = dict.fromkeys(STAGE_GROUPS, 0), 0.0
        for s in r["stages"]:
            ops[stage_group(s["stage"])] += s["state"]["ops"]
            cpu += s["state"]["redis_cpu_s"]
        n, total = r["chunks"], sum(ops.values())
        out.append([label(r), *(per(ops[s], n, 1) for s in STAGE_GROUPS), per(total, n, 1), per(1e6 * cpu, n),
                    per(total, r["seconds"])])
    return md_table(["chunks (extraction)", *STAGE_GROUPS, "total ops/chunk", "state Redis CPU µs/chunk",
                  "ops/s during ingest"], out)


def time_table(rows: list[dict], top: int = 6) -> list[str]:
    """Where the state Redis spends its time: commandstats usec per chunk, the top commands of the ingestion."""
    out = []
    for r in rows:
        usec: dict[str, int] = {}
        for s in r["stages"]:
            for k, v in s["state"].get("usec_by_command", {}).items():
                usec[k] = usec.get(k, 0) + v
        if not usec:
            continue
        n = r["chunks"]
        own = {k: v for k, v in usec.items() if k not in WRAPPERS}
        total = sum(own.values())
        best = sorted(own.items(), key=lambda kv: -kv[1])[:top]
        out.append([label(r), per(total, n, 0), ", ".join(f"{k} {v / n:,.0f} ({100 * v / total:.0f}%)"
                                                         for k, v in best),
                    ", ".join(f"{k} {usec[k] / n:,.0f}" for k in WRAPPERS if k in usec)])
    return md_table(["chunks (extraction)", "µs/chunk in commands", "top commands, µs/chunk (share)",
                  "MULTI/EXEC and scripts, µs/chunk (their commands are also counted left)"], out)


def job_label(j: dict) -> str:
    """A job's number; a ``recluster`` job (the whole-graph clustering the jobs before it left for later, figures per
    chunk held) says so."""
    return f"{j['job']} (recluster)" if j.get("kind") == "recluster" else str(j["job"])


def jobs_table(rows: list[dict]) -> list[str]:
    """Batched runs: what each job cost while the tenant grew (bench reads included, ~12 commands a read)."""
    out = [[label(r), job_label(j), f"{j['chunks_before']:,}", f"{j['chunks_added']:,}", j["seconds"],
            j["state_ops_per_chunk"], f"{j['state_redis_cpu_us_per_chunk']:,.0f}",
            ", ".join(f"{k} {v:,.0f}" for k, v in j["top_usec_per_chunk"].items() if k not in WRAPPERS),
            j["broker_messages_per_chunk"]] for r in rows if len(r.get("jobs") or []) >= 2 for j in r["jobs"]]
    return md_table(["run", "job", "chunks before", "chunks added", "s", "state ops/chunk", "state Redis CPU µs/chunk",
                  "top commands µs/chunk", "broker msgs/chunk"], out) if out else ["(no batched run)"]


def job_stages_table(rows: list[dict]) -> list[str]:
    """Batched runs: each job's seconds per ``stage_group`` (``stage_seconds``) and its LLM calls by stage."""
    jobs = [(r, j) for r in rows if len(r.get("jobs") or []) >= 2 for j in r["jobs"] if "stage_seconds" in j]
    llm = list(dict.fromkeys(s for _r, j in jobs for s in j["llm_by_stage"]))
    out = []
    for r, j in jobs:
        groups = dict.fromkeys(STAGE_GROUPS[1:], 0.0)
        for stage, sec in j["stage_seconds"].items():
            groups[stage_group(stage)] += sec
        out.append([label(r), job_label(j), *(f"{v:.0f}" for v in groups.values()),
                    *(f"{j['llm_by_stage'].get(s, {}).get('calls', 0):,} / "
                      f"{j['llm_by_stage'].get(s, {}).get('prompt_tokens', 0) / 1e6:.1f} M" for s in llm)])
    return md_table(["run", "job", *(f"{g} s" for g in STAGE_GROUPS[1:]), *(f"{s} calls / prompt tokens" for s in llm)],
                    out) if out else ["(no batched run with stage times)"]


def probe_table(rows: list[dict]) -> list[str]:
    """Batched runs with ``--probe-queries``: the context-only local queries a user sent while each job ran."""
    out = [[label(r), job_label(j), q["queries"], q.get("p50_s", "-"), q.get("p95_s", "-"), q.get("max_s", "-")]
           for r in rows for j in r.get("jobs") or [] if (q := j.get("queries_meanwhile"))]
    return md_table(["run", "job", "queries", "p50 s", "p95 s", "slowest s"], out) if out else [
        "(no run with --probe-queries)"]


def capacity_section(before: list[dict], after: list[dict]) -> list[str]:
    """The section "Capacity" of docs/benchmarks.md: the runs before and after the ``MISSING`` script, per chunk."""
    before, after = ([r for r in rows if r.get("bench") == "capacity"] for rows in (before, after))
    if not before:
        return []
    out = ["## Capacity: Redis memory, operations and CPU per chunk", "",
           "`.venv/bin/python -m bench.suites.capacity --sizes 1000 10000 --llm-up-to 1000 --both-at 1000 --out "
           "bench/results/capacity.jsonl` (state and broker on two Redis servers; 'fast' = LLM-free extraction). "
           "Every table of a results file: `.venv/bin/python -m bench.report.capacity bench/results/capacity.jsonl`.",
           "The runs, then the state Redis's operations per ingested chunk by stage:", "", *runs_table(before), "",
           *ops_table(before), ""]
    if after:
        out += ["After the job's completion check became the `MISSING` script "
                "(`bench/results/capacity_after_fix.jsonl`):", "", *ops_table(after), ""]
    return out


def render(rows: list[dict]) -> str:
    parts = [
        "# Capacity bench (bench.suites.capacity)\n",
        "Byte and op figures are per unit at each size; "
        "'fast' = LLM-free extraction (reports, embeddings, answers still call the simulator at 0 ms); "
        "'none' = no LLM at all (`--no-llm`: summaries cut, extractive reports, the local embedder).\n",
        "## Runs\n", *runs_table(rows),
        "\n## Redis memory per unit (bytes; MEMORY USAGE SAMPLES 0 of every key, by family)\n", *memory_table(rows),
        "\n## State Redis operations per ingested chunk, by stage\n", *ops_table(rows),
        "\n## Where the state Redis spends its time (INFO commandstats usec)\n", *time_table(rows),
        "\n## Batched ingestion: each job as the tenant grows\n", *jobs_table(rows),
        "\n## Batched ingestion: each job's seconds by stage (a stage's first start to the next's), LLM work\n",
        *job_stages_table(rows),
        "\n## Queries while the tenant ingests (--probe-queries: context-only local, submit to result)\n",
        *probe_table(rows),
    ]
    return "\n".join(parts) + "\n"


def main() -> None:
    path = Path(sys.argv[1]) if len(sys.argv) > 1 else RESULTS / "capacity.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    sys.stdout.write(render([r for r in rows if r.get("bench") == "capacity"]))


if __name__ == "__main__":
    main()
