"""The graphfleet vs nano-graphrag vs LightRAG tables of docs/benchmarks.md (bench/results/compare.jsonl)."""

from __future__ import annotations

from bench.report.common import NAMES, SYSTEM_MODES, SYSTEMS, current_command, fmt_ratio, md_table, note

STAGES = (("glean", "glean"), ("extract", "extract"), ("summar", "summarize"), ("community_report", "report"),
          ("keywords", "keywords"), ("global_map", "map"), ("map_summarize", "map"), ("global_reduce", "reduce"),
          ("rate_community", "rate"), ("causal", "causal"), ("", "answer"))


def stage_of(kind: str) -> str:
    kind = kind.removeprefix("nano_").removeprefix("lightrag_")
    return next(label for key, label in STAGES if key in kind)


def by_stage(calls_by_type: dict | None) -> str:
    out: dict[str, int] = {}
    for kind, v in (calls_by_type or {}).items():
        out[stage_of(kind)] = out.get(stage_of(kind), 0) + v["calls"]
    return ", ".join(f"{k} {n}" for k, n in out.items()) or "-"


def compare_tables(rows: list[dict]) -> list[str]:
    """Ingestion and query medians per system, with graphfleet/peer ratios."""
    med = [r for r in rows if r["bench"] == "compare_median"]
    if not med:
        return ["(no results yet: run `bash bench/compare.sh`)", ""]
    head = next((r for r in reversed(rows) if r["bench"] == "machine"), {})
    ours = head.get("graphfleet_versions") or {}
    ingest = {(r["system"], r["latency_ms"]): r for r in med if r["phase"] == "ingest"}
    cells = []
    for lat in sorted({k[1] for k in ingest}):
        gf = ingest.get(("graphfleet", lat))
        for r in (ingest[(s, lat)] for s in SYSTEMS if (s, lat) in ingest):
            def ratio(key, r=r, gf=gf):  # graphfleet / this peer
                return fmt_ratio(key(gf), key(r)) if r["system"] != "graphfleet" and gf else "-"

            cells.append([f"{lat:.0f} ms", NAMES[r["system"]], f"{r['seconds_median']:.2f}", r.get("seconds_all"),
                          ratio(lambda x: x["seconds_median"]), r["llm_calls"], by_stage(r["calls_by_type"]),
                          ratio(lambda x: x["llm_calls"]), f"{r['prompt_tokens']:,}", f"{r['completion_tokens']:,}",
                          ratio(lambda x: (x["prompt_tokens"] or 0) + (x["completion_tokens"] or 0)),
                          r["embedding_calls"], r["entities"], r["relations"],
                          f"{r['communities']} {r.get('communities_by_level') or ''}"])
    out = [f"Versions: peers (their venv) {head.get('versions')}; graphfleet (the project's venv) "
           f"{', '.join(f'{k} {v}' for k, v in ours.items()) or '-'}; model `{head.get('model')}`, embeddings dim "
           f"{head.get('embedding_dim')}, {head.get('concurrency')} LLM calls in flight per system; corpus "
           f"`{head.get('corpus')}`; medians of {head.get('repeat')} runs. Command: "
           f"`{current_command(head.get('command') or '')}`.", "", "### Ingestion", "",
           *md_table("latency | system | wall s (median) | runs (s) | graphfleet/peer s | LLM calls | calls by stage "
                     "| graphfleet/peer calls | prompt tokens | completion tokens | graphfleet/peer tokens "
                     "| embedding calls | entities | relations | communities (by level)", cells),
           "", *note("compare_queries")]
    queries = {(r["system"], r["latency_ms"], r["mode"], r["only_need_context"]): r
               for r in med if r["phase"] == "query"}
    cells = []
    for lat, mode, only in sorted({k[1:] for k in queries}, key=lambda k: (k[0], SYSTEM_MODES.index(k[1]), not k[2])):
        by = {s: queries.get((s, lat, mode, only)) for s in SYSTEMS}
        gf = by["graphfleet"]

        def col(key, by=by):
            return " / ".join("-" if by[s] is None or by[s].get(key) is None else f"{by[s][key]:,}" for s in SYSTEMS)

        secs = {s: f"{by[s]['seconds_median']:.3f}" if by[s] else "-" for s in SYSTEMS}
        ratio = {s: fmt_ratio(gf["seconds_median"], by[s]["seconds_median"]) if gf and by[s] else "-"
                 for s in ("nano", "lightrag")}
        cells.append([f"{lat:.0f} ms", mode, only, secs["graphfleet"], secs["nano"], ratio["nano"], secs["lightrag"],
                      ratio["lightrag"], col("context_tokens"), col("llm_calls"), col("prompt_tokens"),
                      " / ".join(by_stage(by[s]["calls_by_type"]) if by[s] else "-" for s in SYSTEMS)])
    return [*out, *md_table("latency | mode | only context | graphfleet s | nano-graphrag s | gf/nano | LightRAG s "
                            "| gf/LightRAG | context tokens (gf / nano / LR) | LLM calls (gf / nano / LR) "
                            "| prompt tokens (gf / nano / LR) | calls by stage (gf / nano / LR)", cells),
            "", *global_phase_table(med)]


def global_phase_table(med: list[dict]) -> list[str]:
    """Global mode's map and reduce work per system: calls and tokens by phase (simulator counters)."""
    rows = [r for r in med if r["phase"] == "query" and r["mode"] == "global"]
    if not rows:
        return []
    cells = []
    for r in sorted(rows, key=lambda r: (r["latency_ms"], not r["only_need_context"], SYSTEMS.index(r["system"]))):
        phases = {k: [0, 0, 0] for k in ("map", "reduce", "other")}
        for kind, v in (r.get("calls_by_type") or {}).items():
            acc = phases[stage_of(kind) if stage_of(kind) in ("map", "reduce") else "other"]
            for i, key in enumerate(("calls", "prompt_tokens", "completion_tokens")):
                acc[i] += v[key]
        m, red, other = phases.values()
        cells.append([f"{r['latency_ms']:.0f} ms", r["only_need_context"], NAMES[r["system"]], m[0], f"{m[1]:,}",
                      f"{m[2]:,}", red[0], f"{red[1] + red[2]:,}", other[0]])
    return [*note("compare_global"), *md_table("latency | only context | system | map calls | map prompt tokens "
                                               "| map completion tokens | reduce calls | reduce tokens (prompt + "
                                               "completion) | other calls", cells), ""]
