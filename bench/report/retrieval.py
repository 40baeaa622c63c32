"""The earlier HotpotQA retrieval tables with the peers (bench/results/retrieval.jsonl, per LLM setting)."""

from __future__ import annotations

from bench.report.common import NAMES, SYSTEM_MODES, fmt_ratio


def retrieval_runs(rows: list[dict]) -> dict[bool, list[dict]]:
    """Per LLM setting, each system's lines from the newest finished run that measured it (systems may
    be run by separate invocations: LightRAG's ingestion alone takes ~25 min), then that run's BM25
    baseline and summary. Runs are split at their ``machine`` line; a run stopped before its summary
    is ignored."""
    runs: list[list[dict]] = []
    for r in rows:
        if r["bench"] == "machine":
            runs.append([])
        elif runs:
            runs[-1].append(r)
    by_llm: dict[bool, list[list[dict]]] = {}
    for run in runs:
        summary = next((r for r in run if r["bench"] == "retrieval_summary"), None)
        if summary:
            by_llm.setdefault(summary["llm"], []).append(run)
    merged: dict[bool, list[dict]] = {}
    for llm, llm_runs in by_llm.items():
        newest = llm_runs[-1]
        summary = next(r for r in newest if r["bench"] == "retrieval_summary")
        chosen: dict[str, list[dict]] = {}
        for run in reversed(llm_runs):
            for system in dict.fromkeys(r.get("system", "graphfleet") for r in run
                                        if r["bench"] in ("retrieval_ingest", "retrieval_mode", "retrieval_error")):
                if system not in chosen and system != "bm25":
                    chosen[system] = [r for r in run if r.get("system", "graphfleet") == system
                                      and r["bench"] != "retrieval_summary"]
        order = ["graphfleet", "nano", "lightrag"]
        lines = [r for system in sorted(chosen, key=lambda x: order.index(x) if x in order else 9)
                 for r in chosen[system]]
        lines += [r for r in newest if r.get("system") == "bm25"]
        merged[llm] = [*lines, summary]
    return merged


def retrieval_table(rows: list[dict]) -> list[str]:
    """Ingest lines, then one row per system and mode, per LLM setting (see ``retrieval_runs``)."""
    out = []
    latest = retrieval_runs(rows)
    for llm, run in sorted(latest.items()):
        summary = next(r for r in run if r["bench"] == "retrieval_summary")
        out += [f"**{'LLM simulator (0 ms)' if llm else 'no LLM (LLM-free extraction, hashing embeddings)'}**: "
                f"{summary['questions']} questions, budget {summary['budget']} tokens ({summary['budget_encoding']}).",
                "", "| system | passages | ingest s | graphfleet/peer s | LLM calls "
                "| index tokens (prompt + completion) | graphfleet/peer tokens | entities | relations |",
                "|---|---|---|---|---|---|---|---|---|"]
        ingests = {r.get("system", "graphfleet"): r for r in run if r["bench"] == "retrieval_ingest"}
        gf = ingests.get("graphfleet")
        for system, r in ingests.items():
            tokens = _index_tokens(r)
            peer = gf is not None and system != "graphfleet"
            out.append(f"| {NAMES.get(system)} | {r['passages']} | {r['seconds']} "
                       f"| {fmt_ratio(gf['seconds'], r['seconds']) if peer else '-'} "
                       f"| {r['llm_calls']} | {tokens:,} | {fmt_ratio(_index_tokens(gf), tokens) if peer else '-'} "
                       f"| {r['entities']} | {r['relations']} |")
        out += ["", *side_by_side(run)]
        out += ["", "| system | mode | questions | gold passages in context (mean) | questions with all gold "
                "passages | context tokens (median) | contexts over budget | s per query (median) |",
                "|---|---|---|---|---|---|---|---|"]
        for r in run:
            if r["bench"] == "retrieval_mode":
                secs = "-" if r["seconds_median"] is None else f"{r['seconds_median']:.3f}"
                system = NAMES.get(r.get("system", "graphfleet"), r.get("system"))
                out.append(f"| {system} | {r['mode']} | {r['questions']} | {r['recall_mean']:.2f} "
                           f"| {r['all_gold_share']:.2f} | {r['context_tokens_median']} "
                           f"| {r.get('over_budget', '-')} | {secs} |")
        out.append("")
        notes = {(r.get("system"), r.get("note") or f"run failed (exit {r.get('returncode')}), see the jsonl")
                 for r in run if r.get("note") or r["bench"] == "retrieval_error"}
        out += [f"- {NAMES.get(system, system)}: {note}" for system, note in sorted(notes)] + ([""] if notes else [])
    return out


def _index_tokens(r: dict) -> int:
    return (r.get("prompt_tokens") or 0) + (r.get("completion_tokens") or 0)


def _recall(r: dict | None, questions: int) -> str:
    """Mean recall; the question count when a system was asked fewer questions than the others."""
    if r is None:
        return "-"
    return f"{r['recall_mean']:.2f}" + (f" ({r['questions']} q)" if r["questions"] != questions else "")


def side_by_side(run: list[dict]) -> list[str]:
    """Per mode: recall and context tokens of each system with graphfleet/peer ratios (recall: above 1 =
    graphfleet keeps more gold passages; tokens: below 1 = graphfleet's context is smaller)."""
    modes = {(r.get("system", "graphfleet"), r["mode"]): r for r in run if r["bench"] == "retrieval_mode"}
    peers = [p for p in ("nano", "lightrag") if any(k[0] == p for k in modes)]
    bm25 = modes.get(("bm25", "bm25 (baseline)"))
    head = ["mode", "graphfleet recall"]
    for p in peers:
        head += [f"{NAMES[p]} recall", f"graphfleet/{NAMES[p]} recall"]
    head += ["context tokens, median (" + " / ".join(["graphfleet", *(NAMES[p] for p in peers)]) + ")",
             "over budget (" + " / ".join(["graphfleet", *(NAMES[p] for p in peers)]) + ")"]
    if bm25:
        head.append("BM25 baseline recall")
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    variants = [m for s, m in modes if s == "graphfleet" and m not in SYSTEM_MODES]  # 'mode [name]', run order
    for mode in (*SYSTEM_MODES, *variants):
        cells = {s: modes.get((s, mode)) for s in ("graphfleet", *peers)}
        if not any(cells.values()):
            continue
        gf = cells["graphfleet"]
        questions = max(r["questions"] for r in cells.values() if r)
        row = [mode, _recall(gf, questions)]
        for p in peers:
            ratio = fmt_ratio(gf["recall_mean"], cells[p]["recall_mean"]) if gf and cells[p] else "-"
            row += [_recall(cells[p], questions), ratio]
        row += [" / ".join("-" if r is None else f"{r['context_tokens_median']:,.0f}" for r in cells.values()),
                " / ".join("-" if r is None else str(r.get("over_budget", "-")) for r in cells.values())]
        if bm25:
            row.append(f"{bm25['recall_mean']:.2f}")
        out.append("| " + " | ".join(row) + " |")
    return out
