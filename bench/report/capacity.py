"""The capacity suite's tables (``bench.suites.capacity`` records): the section of docs/benchmarks.md, and every
table of one results file on stdout.

    .venv/bin/python -m bench.report.capacity [bench/results/capacity.jsonl]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from bench.report.common import RESULTS

STAGE_GROUPS = ["submit", "chunk", "extract", "merge", "index+cluster", "report", "finalize"]


def stage_group(segment: str) -> str:
    """The stage a segment is charged to: its last stage when several started between two reads of the job
    (``chunk+extract`` is mostly extraction)."""
    last = segment.split("+")[-1]
    if last in ("index", "cluster"):
        return "index+cluster"
    if last.startswith("report") or last == "index_done":
        return "report"
    return last if last in STAGE_GROUPS else "finalize"


def load(path: Path) -> list[dict]:
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [r for r in rows if r.get("bench") == "capacity"]


def label(r: dict) -> str:
    return f"{r['chunks']:,} ({r['extraction']})"


def table(head: list[str], rows: list[list]) -> str:
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def fam(r: dict, name: str) -> int:
    return r["families"]["families"].get(name, {}).get("bytes", 0)


def sub(r: dict, name: str) -> int:
    return r["families"]["subfamilies"].get(name, {}).get("bytes", 0)


def per(value: float, n: int, digits: int = 0) -> str:
    return f"{value / n:,.{digits}f}" if n else "-"


def runs_table(rows: list[dict]) -> str:
    out = []
    for r in rows:
        grown = r["memory_after_ingest"]["used_memory"] - r["memory_before"]["used_memory"]
        out.append([label(r), r["documents"], f"{r['corpus_tokens']:,}", r["renamed_copies"], f"{r['entities']:,}",
                    f"{r['relations']:,}", f"{r['communities']:,}", r["seconds"], per(r["chunks"], r["seconds"], 1),
                    f"{grown / 2**20:,.1f}", per(grown, r["chunks"])])
    return table(["chunks (extraction)", "docs", "tokens", "renamed copies", "entities", "relations", "communities",
                  "ingest s", "chunks/s", "used_memory grew MiB", "bytes/chunk all-in"], out)


def memory_table(rows: list[dict]) -> str:
    out = []
    for r in rows:
        n, v = r["chunks"], r["vectors"]
        vec_ent = sub(r, "vec:entities") + sub(r, "vecmeta:entities")
        vec_chunk = sub(r, "vec:chunks") + sub(r, "vecmeta:chunks")
        out.append([label(r), per(fam(r, "chunks"), n), per(fam(r, "documents"), n), per(fam(r, "extractions"), n),
                    per(fam(r, "entities"), r["entities"]), per(fam(r, "relations"), r["relations"]),
                    per(vec_ent, v.get("entities", 0)), per(vec_chunk, v.get("chunks", 0)),
                    per(fam(r, "communities"), r["communities"]), per(fam(r, "llm_cache"), n),
                    per(fam(r, "jobs") + fam(r, "usage"), n)])
    return table(["chunks (extraction)", "chunk", "doc text /chunk", "extraction record /chunk", "entity",
                  "relation", "entity vector", "chunk vector", "community (+report)", "LLM cache /chunk",
                  "job + usage /chunk"], out)


def grouped_stages(r: dict) -> dict[str, dict]:
    acc = {g: {"ops": 0, "cpu": 0.0, "msgs": 0, "bops": 0, "workers": {}} for g in STAGE_GROUPS}
    for s in r["stages"]:
        g = acc[stage_group(s["stage"])]
        g["ops"] += s["state"]["ops"]
        g["cpu"] += s["state"]["redis_cpu_s"]
        g["msgs"] += s["broker"]["messages"]
        g["bops"] += s["broker"]["ops"]
        for k, v in s["cpu_seconds"].items():
            g["workers"][k] = g["workers"].get(k, 0.0) + v
    return acc


def ops_table(rows: list[dict]) -> str:
    out = []
    for r in rows:
        g, n = grouped_stages(r), r["chunks"]
        total_ops = sum(x["ops"] for x in g.values())
        total_cpu = sum(x["cpu"] for x in g.values())
        out.append([label(r), *(per(g[s]["ops"], n, 1) for s in STAGE_GROUPS), per(total_ops, n, 1),
                    per(1e6 * total_cpu, n), per(total_ops, r["seconds"])])
    return table(["chunks (extraction)", *STAGE_GROUPS, "total ops/chunk", "state Redis CPU µs/chunk",
                  "ops/s during ingest"], out)


WRAPPERS = ("exec", "eval", "evalsha")  # their time includes the commands they run (counted under their own names)


def time_table(rows: list[dict], top: int = 6) -> str:
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
    return table(["chunks (extraction)", "µs/chunk in commands", "top commands, µs/chunk (share)",
                  "MULTI/EXEC and scripts, µs/chunk (their commands are also counted left)"], out)


def jobs_table(rows: list[dict]) -> str:
    """Batched runs: what each job cost while the tenant grew (bench reads included, ~12 commands a read)."""
    out = []
    for r in rows:
        for j in r.get("jobs") or []:
            if len(r["jobs"]) < 2:
                continue
            top = ", ".join(f"{k} {v:,.0f}" for k, v in j["top_usec_per_chunk"].items() if k not in WRAPPERS)
            out.append([label(r), j["job"], f"{j['chunks_before']:,}", f"{j['chunks_added']:,}", j["seconds"],
                        j["state_ops_per_chunk"], f"{j['state_redis_cpu_us_per_chunk']:,.0f}", top,
                        j["broker_messages_per_chunk"]])
    return table(["run", "job", "chunks before", "chunks added", "s", "state ops/chunk", "state Redis CPU µs/chunk",
                  "top commands µs/chunk", "broker msgs/chunk"], out) if out else "(no batched run)"


def capacity_section(before: list[dict], after: list[dict]) -> list[str]:
    """The section "Capacity" of docs/benchmarks.md: the runs before and after the ``MISSING`` script, per chunk."""
    before, after = ([r for r in rows if r.get("bench") == "capacity"] for rows in (before, after))
    if not before:
        return []
    out = ["## Capacity: Redis memory, operations and CPU per chunk", "",
           "`.venv/bin/python -m bench.suites.capacity --sizes 1000 10000 --llm-up-to 1000 --both-at 1000 --out "
           "bench/results/capacity.jsonl` (state and broker on two Redis servers; 'fast' = LLM-free extraction). "
           "Every table of a results file: `.venv/bin/python -m bench.report.capacity bench/results/capacity.jsonl`.",
           "The runs, then the state Redis's operations per ingested chunk by stage:", "", runs_table(before), "",
           ops_table(before), ""]
    if after:
        out += ["After the job's completion check became the `MISSING` script "
                "(`bench/results/capacity_after_fix.jsonl`):", "", ops_table(after), ""]
    return out


def render(rows: list[dict]) -> str:
    parts = [
        "# Capacity bench (bench.suites.capacity)\n",
        "Byte and op figures are per unit at each size; "
        "'fast' = LLM-free extraction (reports, embeddings, answers still call the simulator at 0 ms).\n",
        "## Runs\n", runs_table(rows),
        "\n## Redis memory per unit (bytes; MEMORY USAGE SAMPLES 0 of every key, by family)\n", memory_table(rows),
        "\n## State Redis operations per ingested chunk, by stage\n", ops_table(rows),
        "\n## Where the state Redis spends its time (INFO commandstats usec)\n", time_table(rows),
        "\n## Batched ingestion: each job as the tenant grows\n", jobs_table(rows),
    ]
    return "\n".join(parts) + "\n"


def main() -> None:
    path = Path(sys.argv[1]) if len(sys.argv) > 1 else RESULTS / "capacity.jsonl"
    sys.stdout.write(render(load(path)))


if __name__ == "__main__":
    main()
