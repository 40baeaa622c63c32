"""The tables of the graphfleet-only suites: scaling, clustering, the graph walk."""

from __future__ import annotations

from bench.report.common import fmt_ratio, md_table, newest, no_results


def scaling_table(rows: list[dict]) -> list[str]:
    med = newest([r for r in rows if r["bench"] == "scaling_median"], "corpus", "processes", "latency_ms")
    if not med:
        return no_results("scaling --out bench/results/scaling.jsonl")
    runs, out = [r for r in rows if r["bench"] == "scaling"], []
    med.sort(key=lambda m: (m["corpus"] != "carol", m["corpus"], m["latency_ms"], m["processes"]))
    for m in med:
        key = (m["corpus"], m["latency_ms"])
        one = next((x for x in med if (x["corpus"], x["latency_ms"]) == key and x["processes"] == 1), None)
        run = [r for r in runs if (r["corpus"], r["latency_ms"]) == key and r["processes"] == m["processes"]][-1]
        out.append([m["corpus"], f"{m['latency_ms']:.0f} ms", m["documents"], f"{m['tokens']:,}", m["chunks"],
                    m["processes"], f"{m['seconds_median']:.1f}", f"{m['chunks_per_s_median']:.1f}",
                    f"{m['chunks_per_s_median'] / one['chunks_per_s_median']:.2f}" if one else "-",
                    f"{run['llm_calls']:,}", f"{run['entities']:,}", f"{run['relations']:,}"])
    return [*md_table("corpus | simulator latency | documents | tokens | chunks | worker processes per queue group "
                      "| wall s (median) | chunks/s | speed-up vs 1 process | LLM calls | entities | relations",
                      out), ""]


def clustering_table(rows: list[dict]) -> list[str]:
    rows = [r for r in rows if r.get("bench") == "clustering"]
    if not rows:
        return no_results("clustering --repeat 3 --graspologic-python .bench/peers-venv/bin/python "
                     "--out bench/results/clustering.jsonl")
    latest, out = {(r["graph"], r["impl"]): r for r in rows}, []
    for graph in dict.fromkeys(r["graph"] for r in rows):
        ours, theirs = latest.get((graph, "graphfleet")), latest.get((graph, "graspologic")) or {}
        if ours:
            out.append([graph, f"{ours['nodes']:,}", f"{ours['edges']:,}", f"{ours['seconds']:.3f}",
                        theirs.get("seconds", "-"), fmt_ratio(ours["seconds"], theirs.get("seconds")),
                        "/".join(str(v) for v in ours["levels"].values()),
                        "/".join(str(v) for v in (theirs.get("levels") or {}).values()) or "-"])
    return [*md_table("graph | nodes | edges | graphfleet s (median) | graspologic s (median) | graphfleet/graspologic "
                      "| communities per level (graphfleet) | communities per level (graspologic)", out), ""]


def walk_table(walks: list[dict]) -> list[str]:
    if not walks:
        return no_results("walk --out bench/results/walk.jsonl")
    head = "passages | entities | edges | build s | arrays MiB | snapshot MiB | snapshot load s | walk ms p50 | p95"
    cols = ("build_s", "arrays_mb", "snapshot_mb", "snapshot_load_s", "query_ms_p50", "query_ms_p95")
    return [*md_table(head, [
        [f"{r['passages']:,}", f"{r['entities']:,}", f"{r['edges']:,}", *(r.get(c, "-") for c in cols)]
        for r in sorted(walks, key=lambda r: r["passages"])]), ""]
