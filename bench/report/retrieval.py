"""The earlier HotpotQA retrieval tables with the peers (bench/results/retrieval.jsonl, per LLM setting)."""

from __future__ import annotations

from bench.report.common import NAMES, SYSTEM_MODES, fmt_ratio, md_row, md_table

_ORDER = ["graphfleet", "nano", "lightrag"]


def retrieval_runs(rows: list[dict]) -> dict[bool, list[dict]]:
    """Per LLM setting, each system's lines from the newest finished run that measured it (systems may be run by
    separate invocations), then that run's BM25 baseline and summary. Runs are split at their ``machine`` line;
    a run stopped before its summary is ignored."""
    runs: list[list[dict]] = []
    for r in rows:
        if r["bench"] == "machine":
            runs.append([])
        elif runs:
            runs[-1].append(r)
    by_llm: dict[bool, list[list[dict]]] = {}
    for run in runs:
        if summary := next((r for r in run if r["bench"] == "retrieval_summary"), None):
            by_llm.setdefault(summary["llm"], []).append(run)
    merged: dict[bool, list[dict]] = {}
    for llm, llm_runs in by_llm.items():
        chosen: dict[str, list[dict]] = {}
        for run in reversed(llm_runs):
            for system in dict.fromkeys(r.get("system", "graphfleet") for r in run
                                        if r["bench"] in ("retrieval_ingest", "retrieval_mode", "retrieval_error")):
                if system not in chosen and system != "bm25":
                    chosen[system] = [r for r in run if r.get("system", "graphfleet") == system
                                      and r["bench"] != "retrieval_summary"]
        lines = [r for s in sorted(chosen, key=lambda x: _ORDER.index(x) if x in _ORDER else 9) for r in chosen[s]]
        merged[llm] = [*lines, *(r for r in llm_runs[-1] if r.get("system") == "bm25"),
                       next(r for r in llm_runs[-1] if r["bench"] == "retrieval_summary")]
    return merged


def _index_tokens(r: dict) -> int:
    return (r.get("prompt_tokens") or 0) + (r.get("completion_tokens") or 0)


def retrieval_table(rows: list[dict]) -> list[str]:
    """Ingest lines, then one row per system and mode, per LLM setting (see ``retrieval_runs``)."""
    out = []
    for llm, run in sorted(retrieval_runs(rows).items()):
        summary = run[-1]
        ingests = {r.get("system", "graphfleet"): r for r in run if r["bench"] == "retrieval_ingest"}
        gf = ingests.get("graphfleet")
        cells = [[NAMES.get(s), r["passages"], r["seconds"], fmt_ratio(gf["seconds"], r["seconds"]) if peer else "-",
                  r["llm_calls"], f"{_index_tokens(r):,}", fmt_ratio(_index_tokens(gf), _index_tokens(r)) if peer
                  else "-", r["entities"], r["relations"]]
                 for s, r in ingests.items() for peer in [gf is not None and s != "graphfleet"]]
        modes = [[NAMES.get(r.get("system", "graphfleet"), r.get("system")), r["mode"], r["questions"],
                  f"{r['recall_mean']:.2f}", f"{r['all_gold_share']:.2f}", r["context_tokens_median"],
                  r.get("over_budget", "-"), "-" if r["seconds_median"] is None else f"{r['seconds_median']:.3f}"]
                 for r in run if r["bench"] == "retrieval_mode"]
        notes = {(r.get("system"), r.get("note") or f"run failed (exit {r.get('returncode')}), see the jsonl")
                 for r in run if r.get("note") or r["bench"] == "retrieval_error"}
        out += [f"**{'LLM simulator (0 ms)' if llm else 'no LLM (LLM-free extraction, hashing embeddings)'}**: "
                f"{summary['questions']} questions, budget {summary['budget']} tokens ({summary['budget_encoding']}).",
                "", *md_table("system | passages | ingest s | graphfleet/peer s | LLM calls | index tokens (prompt + "
                              "completion) | graphfleet/peer tokens | entities | relations", cells),
                "", *side_by_side(run), "",
                *md_table("system | mode | questions | gold passages in context (mean) | questions with all gold "
                          "passages | context tokens (median) | contexts over budget | s per query (median)", modes),
                "", *(f"- {NAMES.get(system, system)}: {note}" for system, note in sorted(notes)),
                *([""] if notes else [])]
    return out


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
    systems = " / ".join(["graphfleet", *(NAMES[p] for p in peers)])
    head = ["mode", "graphfleet recall"]
    for p in peers:
        head += [f"{NAMES[p]} recall", f"graphfleet/{NAMES[p]} recall"]
    out = md_table([*head, f"context tokens, median ({systems})", f"over budget ({systems})",
                    *(["BM25 baseline recall"] if bm25 else [])], [])
    variants = [m for s, m in modes if s == "graphfleet" and m not in SYSTEM_MODES]  # 'mode [name]', run order
    for mode in (*SYSTEM_MODES, *variants):
        cells = {s: modes.get((s, mode)) for s in ("graphfleet", *peers)}
        if not any(cells.values()):
            continue
        gf = cells["graphfleet"]
        questions = max(r["questions"] for r in cells.values() if r)
        row = [mode, _recall(gf, questions)]
        for p in peers:
            row += [_recall(cells[p], questions),
                    fmt_ratio(gf["recall_mean"], cells[p]["recall_mean"]) if gf and cells[p] else "-"]
        row += [" / ".join("-" if r is None else f"{r['context_tokens_median']:,.0f}" for r in cells.values()),
                " / ".join("-" if r is None else str(r.get("over_budget", "-")) for r in cells.values()),
                *([f"{bm25['recall_mean']:.2f}"] if bm25 else [])]
        out.append(md_row(row))
    return out
