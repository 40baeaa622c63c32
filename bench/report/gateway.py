"""The gateway rows of issue 21's table (``bench.report.cost``): warm local queries through the gateway, and the
first query of a fresh stack and after an ingestion against the warm ones (``bench.suites.gateway_latency``; a
phase measured on several stacks, or after several ingestions, is judged on the medians of its records)."""

from __future__ import annotations

import statistics

from bench.report.common import Row

GATEWAY_P50_S, GATEWAY_SPREAD = 0.060, 1.5  # p50 <= 60 ms, p95 <= 1.5x p50
_FIGURES = {"first": "first_s", "p50": "warm_p50_s", "p95": "warm_p95_s", "n": "warm_runs"}


def _within(figs: list[dict], first: str, p95: str) -> int:
    return sum(f[first] <= f[p95] for f in figs if f[first] is not None and f[p95] is not None)


def gateway_figures(rows: list[dict]) -> dict:
    """Per phase (``ingest``, ``fresh``): the figures of ``bench.suites.gateway_latency``'s records; measured on
    several stacks (``--trials``), the median of each, and in how many the first query was within the warm p95."""
    phases: dict[str, list[dict]] = {}
    for r in rows:
        if r.get("bench") == "gateway_latency" and "phase" in r:
            phase = {"after_ingest": "ingest", "fresh_stack": "fresh"}.get(r["phase"], r["phase"])
            phases.setdefault(phase, []).append({k: r.get(f) for k, f in _FIGURES.items()})
    out: dict = {}
    for phase, figs in phases.items():
        out[phase] = figs[0] if len(figs) == 1 else {
            **figs[0], "trials": len(figs), "within": _within(figs, "first", "p95"),
            **{k: statistics.median(v) if (v := [f[k] for f in figs if f.get(k) is not None]) else None
               for k in ("first", "p50", "p95")}}
    return out


def gateway_row(rows) -> Row:
    fig = gateway_figures(rows).get("ingest") or {}
    row = Row("local answer through the gateway, p50 / p95, 0 ms", nano="(in-process)",
              target=f"p50 ≤ {GATEWAY_P50_S * 1000:.0f} ms, p95 ≤ {GATEWAY_SPREAD}× p50")
    p50, p95 = fig.get("p50"), fig.get("p95")
    if p50 is None or p95 is None:
        return row
    row.graphfleet = f"{p50:.3f} / {p95:.3f} s (n={fig.get('n')}" + (
        f" per phase, medians of {fig['trials']} phases)" if fig.get("trials") else ")")
    row.ratio = f"p95/p50 {p95 / p50:.2f}"
    gaps = ([f"p50 {p50 * 1000:.0f} ms > {GATEWAY_P50_S * 1000:.0f} ms"] if p50 > GATEWAY_P50_S else []) + \
        ([f"p95 {p95 * 1000:.0f} ms = {p95 / p50:.2f}× p50 > {GATEWAY_SPREAD}×"] if p95 > GATEWAY_SPREAD * p50 else [])
    row.met, row.gap = not gaps, "; ".join(gaps)
    return row


def _first_gap(f: dict, unit: str) -> str:
    first, p95 = f["first"], f.get("p95") or f["p50"]
    trials = (f"; medians of {f['trials']} {unit}; within the warm p95 in {f['within']} of {f['trials']}"
              if f.get("trials") else "")
    return f"first {first * 1000:.0f} ms vs warm p95 {p95 * 1000:.0f} ms: {(first - p95) * 1000:.0f} ms{trials}"


def first_query_rows(rows) -> list[Row]:
    """No penalty: the first query is no slower than the warm queries' p95 (medians over the stacks, or over the
    ingestions, when a phase was measured several times)."""
    fig, out = gateway_figures(rows), []
    for key, label, unit in (("fresh", "first query on a fresh stack vs warm", "stacks"),
                             ("ingest", "first query after an ingestion vs warm", "ingestions")):
        f = fig.get(key) or {}
        row = Row(label, nano="no penalty", target="no penalty (first ≤ warm p95)")
        if f.get("first") is not None and f.get("p50"):
            first, p50 = f["first"], f["p50"]
            row.graphfleet = f"{first:.3f} vs {p50:.3f} s" + (f" ({f['trials']} {unit})" if f.get("trials") else "")
            row.ratio, row.met = f"first/p50 {first / p50:.2f}", first <= (f.get("p95") or p50)
            row.gap = "" if row.met else _first_gap(f, unit)
        if f.get("first") is not None or key == "fresh":
            out.append(row)
    return out
