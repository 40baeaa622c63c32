"""The tables of the graphfleet-only suites: ingestion, queries, scaling, clustering, the graph walk."""

from __future__ import annotations

from bench.report.common import fmt_ratio, newest

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
        return ["(no results yet: `.venv/bin/python -m bench.suites.scaling --out bench/results/scaling.jsonl`)", ""]
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
        return ["(no results yet: `.venv/bin/python -m bench.suites.clustering --repeat 3 --graspologic-python "
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


def walk_table(walks: list[dict]) -> list[str]:
    """Markdown rows for docs/benchmarks.md (the newest record per size)."""
    if not walks:
        return ["(no results yet: `.venv/bin/python -m bench.suites.walk --out bench/results/walk.jsonl`)", ""]
    out = ["| passages | entities | edges | build s | arrays MiB | walk ms p50 | walk ms p95 |",
           "|---|---|---|---|---|---|---|"]
    for r in sorted(walks, key=lambda r: r["passages"]):
        out.append(f"| {r['passages']:,} | {r['entities']:,} | {r['edges']:,} | {r['build_s']} | "
                   f"{r['arrays_mb']} | {r['query_ms_p50']} | {r['query_ms_p95']} |")
    return [*out, ""]
