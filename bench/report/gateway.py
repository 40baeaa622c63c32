"""The gateway rows of issue 21's table (``bench.report.cost``): warm local queries through the gateway, and the
first query of a fresh stack and after an ingestion against the warm ones (``bench.suites.gateway_latency``; a phase
measured on several stacks, or after several ingestions, is judged on the medians of its records)."""

from __future__ import annotations

import statistics

from bench.report.common import Row

GATEWAY_P50_S, GATEWAY_SPREAD = 0.060, 1.5  # p50 <= 60 ms, p95 <= 1.5x p50
_MEDIANS = ("first", "p50", "p95", "first_own", "own_p95")


def _phase_figures(r: dict) -> dict:
    return {"first": r.get("first_s"), "p50": r.get("warm_p50_s"), "p95": r.get("warm_p95_s"),
            "n": r.get("warm_runs"), "cpu": r.get("warm_cpu_ms_per_query"),
            "first_own": r.get("first_own_ms"), "own_p95": r.get("warm_own_ms_p95"),
            "idle_own": list(r.get("idle_own_ms") or []), "idle_s": r.get("idle_s")}


def _over_trials(figs: list[dict]) -> dict:
    """One phase measured on several stacks (``--trials``): the median of each figure, and in how many stacks
    the first query was within the warm p95 (wall time, and graphfleet's own time outside the LLM calls)."""
    out = {**figs[0], "trials": len(figs), "idle_own": [x for f in figs for x in f["idle_own"]],
           "within": sum(f["first"] <= f["p95"] for f in figs if f["first"] is not None and f["p95"] is not None),
           "own_within": sum(f["first_own"] <= f["own_p95"] for f in figs
                             if f["first_own"] is not None and f["own_p95"] is not None)}
    for key in _MEDIANS:
        values = [f[key] for f in figs if f.get(key) is not None]
        out[key] = statistics.median(values) if values else None
    return out


def gateway_figures(rows: list[dict]) -> dict:
    """p50 / p95 / n of warm local queries and the first query's seconds, from ``bench.suites.gateway_latency``'s
    phase records (one per stack)."""
    out: dict = {}
    phases: dict[str, list[dict]] = {}
    for r in rows:
        if r.get("bench") == "gateway_latency" and "phase" in r:
            phase = {"after_ingest": "ingest", "fresh_stack": "fresh"}.get(r["phase"], r["phase"])
            phases.setdefault(phase, []).append(_phase_figures(r))
    for phase, figs in phases.items():
        out[phase] = figs[0] if len(figs) == 1 else _over_trials(figs)
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
    if gaps and fig.get("cpu"):
        gaps.append(_cpu_split(fig["cpu"]))
    row.met, row.gap = not gaps, "; ".join(gaps)
    return row


def _cpu_split(cpu: dict[str, float]) -> str:
    """What each process computed per warm query (``bench.suites.gateway_latency``'s ``warm_cpu_ms_per_query``)."""
    own = {k: v for k, v in cpu.items() if k in ("gateway", "query", "redis")}
    return (f"CPU per warm query: graphfleet's processes {sum(own.values()):.0f} ms ("
            + ", ".join(f"{k} {v:.0f}" for k, v in own.items()) + f"), the LLM simulator {cpu.get('simulator', 0):.0f}"
            " ms, on the same 2 cores (one query's path is serial: gateway, worker, LLM, worker, gateway)")


def _first_gap(f: dict, unit: str) -> str:
    first, p95 = f["first"], f.get("p95") or f["p50"]
    gap = [f"first {first * 1000:.0f} ms vs warm p95 {p95 * 1000:.0f} ms: {(first - p95) * 1000:.0f} ms"]
    if f.get("trials"):
        gap.append(f"medians of {f['trials']} {unit}; within the warm p95 in {f['within']} of {f['trials']}")
    if f.get("first_own") is not None and f.get("own_p95") is not None:
        gap.append(f"outside its LLM call (graphfleet's own time): first {f['first_own']:.0f} ms vs warm p95 "
                   f"{f['own_p95']:.0f} ms" + (f", within it in {f['own_within']} of {f['trials']} {unit}"
                                               if f.get("trials") else ""))
    if f.get("idle_own"):
        idle = f["idle_own"]
        gap.append(f"a query on the warm stack after {f['idle_s']:g} s idle, outside its LLM call: median "
                   f"{statistics.median(idle):.0f} ms, up to {max(idle):.0f} ms ({len(idle)} queries)")
    return "; ".join(gap)


def first_query_rows(rows) -> list[Row]:
    """No penalty: the first query is no slower than the warm queries' p95 (medians over the stacks, or over the
    ingestions, when a phase was measured several times)."""
    fig = gateway_figures(rows)
    out = []
    for key, label, unit in (("fresh", "first query on a fresh stack vs warm", "stacks"),
                             ("ingest", "first query after an ingestion vs warm", "ingestions")):
        f = fig.get(key) or {}
        row = Row(label, nano="no penalty", target="no penalty (first ≤ warm p95)")
        if f.get("first") is not None and f.get("p50"):
            first, p50, p95 = f["first"], f["p50"], f.get("p95") or f["p50"]
            row.graphfleet = f"{first:.3f} vs {p50:.3f} s" + (f" ({f['trials']} {unit})" if f.get("trials") else "")
            row.ratio = f"first/p50 {first / p50:.2f}"
            row.met = first <= p95
            if not row.met:
                row.gap = _first_gap(f, unit)
        if f.get("first") is not None or key == "fresh":
            out.append(row)
    return out
