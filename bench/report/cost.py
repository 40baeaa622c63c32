"""Issue 21's table in docs/benchmarks.md, from the newest run of bench/results/cost_table.jsonl. The gateway rows
come from ``bench.suites.gateway_latency``'s records: a phase measured on several stacks, or after several
ingestions, is judged on the medians of its records."""

from __future__ import annotations

import statistics

from bench.harness.results import median
from bench.report.common import NOT_MEASURED, Row, current_command, md_row, md_table, no_results, note
from shared.domain.query.params import QueryParam

LOCAL_SLACK_S = 0.020  # local answer: <= nano + 20 ms
GLOBAL_TOKENS_RATIO, GLOBAL_COVERAGE = 0.1, 0.9
INGEST_TARGETS = {"0": 0.8, "200": 0.5, "token": 0.3}  # graphfleet/nano seconds
GATEWAY_P50_S, GATEWAY_SPREAD = 0.060, 1.5  # p50 <= 60 ms, p95 <= 1.5x p50
_FIGURES = {"first": "first_s", "p50": "warm_p50_s", "p95": "warm_p95_s", "n": "warm_runs"}


def newest_run(rows: list[dict]) -> list[dict]:
    """The records of the newest ``run_id`` (the file is appended to by every run)."""
    ids = [r["run_id"] for r in rows if r.get("run_id")]
    return [r for r in rows if r.get("run_id") == ids[-1]] if ids else []


def _s(x: float) -> str:
    return f"{x:.3f} s"


def _cell(median: dict) -> str:
    return _s(median["seconds_median"]) + (f" ({median['failed']} failed)" if median.get("failed") else "")


def _median(rows, system, latency, mode=None, processes=1, ms_per_token=0.0) -> dict | None:
    """A ``compare_median`` record: ingestion (``mode`` None) or the answer (not context-only) of ``mode``."""
    return next((r for r in rows if r.get("bench") == "compare_median" and r["system"] == system
                 and r["latency_ms"] == latency and r.get("ms_per_token", 0.0) == ms_per_token
                 and (system != "graphfleet" or r.get("processes", 1) == processes)
                 and (r["phase"] == "ingest" if mode is None
                      else r["phase"] == "query" and r["mode"] == mode and not r["only_need_context"])), None)


def answer_row(rows, label: str, mode: str, latency: float, nano_mode: str | None = None) -> Row:
    gf, nano = _median(rows, "graphfleet", latency, mode), _median(rows, "nano", latency, nano_mode or mode)
    row = Row(label, target="≤ 1.0× nano" if mode == "global" else "≤ nano + 20 ms")
    row.graphfleet, row.nano = (_cell(m) if m else NOT_MEASURED for m in (gf, nano))
    if not (gf and nano):
        return row
    g, n = gf["seconds_median"], nano["seconds_median"]
    row.ratio = f"{g / n:.2f}"
    limit = n if mode == "global" else n + LOCAL_SLACK_S
    row.met = g <= limit
    if not row.met:
        row.gap = f"graphfleet {_s(g)} vs ≤ {_s(limit)}: {(g - limit) * 1000:.0f} ms over"
    return row


def ingest_row(rows, latency: float, processes: int | str, ms_per_token: float = 0.0) -> Row:
    key = "token" if ms_per_token else f"{latency:g}"
    what = f"{ms_per_token:g} ms per completion token" + (f" + {latency:g} ms" if latency else "") \
        if ms_per_token else f"{latency:g} ms"
    factor = INGEST_TARGETS.get(key, INGEST_TARGETS["0"])
    procs = "processes auto, `graphfleet up`'s default" if processes == "auto" else \
        f"{processes} process{'es' if int(processes) > 1 else ''}"
    row = Row(f"ingest at {what} (Carol, {procs})", target=f"≤ {factor}× nano")
    gf, nano = (_median(rows, system, latency, None, processes, ms_per_token) for system in ("graphfleet", "nano"))
    row.graphfleet, row.nano = (_cell(m) if m else NOT_MEASURED for m in (gf, nano))
    if gf and nano:
        g, n = gf["seconds_median"], nano["seconds_median"]
        row.ratio, row.met = f"{g / n:.2f}", g <= factor * n
        row.gap = "" if row.met else f"{_s(g)} = {g / n:.2f}× nano {_s(n)} ({g - factor * n:.2f} s over)"
    return row


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
            **figs[0], "trials": len(figs),
            "within": sum(f["first"] <= f["p95"] for f in figs if f["first"] is not None and f["p95"] is not None),
            **{k: median(f[k] for f in figs) for k in ("first", "p50", "p95")}}
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


def global_cost(rows: list[dict]) -> dict[str, dict[str, dict]]:
    """corpus -> system -> mean tokens / calls / map calls / coverage over the questions that succeeded, with the
    question counts; corpora with the most passages (``global_cost_ingest`` documents) first."""
    out: dict[str, dict[str, dict]] = {}
    recs = [r for r in rows if r.get("bench") == "global_cost"]
    passages = {r["corpus"]: r.get("documents") for r in rows if r.get("bench") == "global_cost_ingest"}
    for corpus in sorted(dict.fromkeys(r["corpus"] for r in recs), key=lambda c: -(passages.get(c) or 0)):
        for system in dict.fromkeys(r["system"] for r in recs if r["corpus"] == corpus):
            mine = [r for r in recs if (r["corpus"], r["system"]) == (corpus, system)]
            ok = [r for r in mine if r.get("status", "succeeded") == "succeeded" and r.get("tokens") is not None]
            if not ok:
                continue
            cov = [r["coverage"] for r in ok if r.get("coverage") is not None]
            out.setdefault(corpus, {})[system] = {
                "questions": len(ok), "failed": len(mine) - len(ok), "tokens": statistics.mean(r["tokens"] for r in ok),
                "calls": statistics.mean(r["calls"] for r in ok),
                "map_calls": statistics.mean(r.get("map_calls") or 0 for r in ok),
                "coverage": statistics.mean(cov) if cov else None, "min_coverage": min(cov) if cov else None,
                "direct": sum(r.get("answer_path") == "direct" for r in ok), "passages": passages.get(corpus)}
    return out


def global_tokens_rows(rows) -> list[Row]:
    out = []
    costs = global_cost(rows) or {"~2,000-passage corpus": {}}
    for corpus, by_system in costs.items():
        gf, nano = by_system.get("graphfleet"), by_system.get("nano")
        size = f", {gf['passages']:,} passages" if gf and (gf.get("passages") or 0) > 1 else ""
        row = Row(f"global answer, LLM tokens per question, {corpus}{size}",
                  target=f"≤ {GLOBAL_TOKENS_RATIO}× nano at ≥ {GLOBAL_COVERAGE:.0%} coverage")
        if gf:
            cov = f", coverage {gf['coverage']:.0%}" if gf["coverage"] is not None else ""
            direct = f", {gf['direct']} of {gf['questions']} answered in one call" if gf.get("direct") else ""
            row.graphfleet = f"{gf['tokens']:,.0f} (≈ {gf['map_calls']:.0f} map calls{direct}{cov})"
        if nano:
            row.nano = f"{nano['tokens']:,.0f}"
        if gf and nano and nano["tokens"] and gf["coverage"] is not None:
            ratio = gf["tokens"] / nano["tokens"]
            row.ratio = f"{ratio:.3f}"
            gaps = ([f"{ratio:.3f}× nano's tokens > {GLOBAL_TOKENS_RATIO}×"] if ratio > GLOBAL_TOKENS_RATIO else []) + \
                ([f"coverage {gf['coverage']:.0%} < {GLOBAL_COVERAGE:.0%}"] if gf["coverage"] < GLOBAL_COVERAGE else [])
            row.met, row.gap = not gaps, "; ".join(gaps)
        out.append(row)
    return out


def cost_rows(rows: list[dict]) -> list[Row]:
    """Issue 21's table, top to bottom, from one run's records."""
    procs = sorted({r.get("processes", 1) for r in rows if r.get("bench") == "compare_median"},
                   key=lambda p: (p == "auto", 0 if p == "auto" else int(p))) or [1]
    token = sorted({(r["latency_ms"], r["ms_per_token"]) for r in rows
                    if r.get("bench") == "compare_median" and r.get("ms_per_token")}) or [(0.0, 12.5)]
    return [*global_tokens_rows(rows),
            answer_row(rows, "global answer at 200 ms (Carol)", "global", 200.0),
            answer_row(rows, "local answer at 0 ms (Carol)", "local", 0.0),
            answer_row(rows, "local answer at 0 ms (Carol), both at nano's max_total_tokens 12,000", "local@12000",
                       0.0, "local"),
            gateway_row(rows), *first_query_rows(rows),
            *(ingest_row(rows, 200.0, p) for p in procs), *(ingest_row(rows, 0.0, p) for p in procs),
            *(ingest_row(rows, lat, p, mt) for lat, mt in token for p in procs)]


def coverage_table(rows: list[dict]) -> list[str]:
    """Per question: graphfleet's (selected) tokens, calls and coverage beside the full scan's and nano's."""
    recs = [r for r in rows if r.get("bench") == "global_cost"]
    if not recs:
        return [f"Global cost per question: {NOT_MEASURED}.", ""]

    def get(r, key, spec=","):
        return NOT_MEASURED if r is None or r.get(key) is None else format(r[key], spec)

    cells, out = {(r["corpus"], r["question"], r["system"]): r for r in recs}, []
    for corpus, question in dict.fromkeys((r["corpus"], r["question"]) for r in recs):
        gf, full, nano = (cells.get((corpus, question, s)) for s in ("graphfleet", "graphfleet-full", "nano"))
        calls = NOT_MEASURED if gf is None else f"{gf['calls']} ({gf.get('map_calls')} / {gf.get('reduce_calls')})"
        if gf is not None and gf.get("answer_path") == "direct":
            calls = f"{gf['calls']} (direct: no map, no reduce)"
        out.append([corpus, question, get(gf, "tokens"), calls, get(gf, "coverage", ".0%"), get(full, "tokens"),
                    get(full, "calls"), get(nano, "tokens"), get(nano, "calls"),
                    f"{gf['tokens'] / nano['tokens']:.3f}" if gf and nano and nano.get("tokens") else "-"])
    return [*md_table("corpus | question | graphfleet tokens | calls (map / reduce) | coverage | full scan tokens "
                      "| full scan calls | nano-graphrag tokens | nano calls | graphfleet/nano tokens", out), ""]


def _ms(r: dict | None, key: str = "seconds_median") -> float | None:
    """A context build's milliseconds (``bench.suites.context_build`` records seconds)."""
    return r[key] * 1000 if r is not None and r.get(key) is not None else None


def context_table(rows: list[dict]) -> list[str]:
    recs = [r for r in rows if r.get("bench") == "context_build"]
    if not recs:
        return [f"Context build in-process: {NOT_MEASURED}.", ""]
    cells, out = {(r["system"], r.get("mode") or "-", r["max_total_tokens"]): r for r in recs}, []

    def cell(r) -> list[str]:  # p50 / p95 ms, context tokens
        if _ms(r) is None:
            return [NOT_MEASURED, "-"]
        p95, tokens = _ms(r, "seconds_p95"), r.get("context_tokens")
        return [f"{_ms(r):.1f}" + (f" / {p95:.1f}" if p95 is not None else ""),
                f"{tokens:,}" if isinstance(tokens, int) else "-"]

    for mode, budget in sorted({k[1:] for k in cells}):
        gf, nano = cells.get(("graphfleet", mode, budget)), cells.get(("nano", mode, budget))
        out.append([mode, f"{budget:,}", *cell(gf), *cell(nano),
                    f"{_ms(gf) / _ms(nano):.2f}" if _ms(gf) is not None and _ms(nano) else "-"])
    return [*md_table("mode | max_total_tokens | graphfleet p50 / p95 ms | context tokens | nano-graphrag p50 / p95 ms "
                      "| context tokens | graphfleet/nano p50", out), ""]


def _last_line(text: str | None) -> str:
    lines = (text or "").strip().splitlines()
    return lines[-1] if lines else ""


def _commands(rows: list[dict]) -> list[str]:
    head = next((r for r in rows if r.get("bench") == "cost_run"), {})
    subs = dict.fromkeys(r["command"] for r in rows if r.get("command") and r.get("bench") != "cost_run")
    missing = [f"- `{r['row']}` ({r.get('module')}): {_last_line(r.get('reason'))}"
               for r in rows if r.get("bench") == "cost_missing"]
    missing += [f"- `{r['bench']}`: {r['system']} in `{r.get('row')}`" + (f", run {r['run']}" if "run" in r else "")
                + f" failed: {_last_line(r.get('error') or r.get('stderr'))}"
                for r in rows if str(r.get("bench")).endswith("_error")]
    end = next((r for r in rows if r.get("bench") == "cost_run_end"), {})
    command = current_command(head.get("command", "python -m bench.suites.cost_table"))
    out = [f"Command: `.venv/bin/{command}` (run `{head.get('run_id')}`, "
           f"{end.get('seconds', '?')} s; medians of {head.get('repeat')} runs per compare configuration"
           f"{', after ' + str(head['warmup']) + ' unmeasured warm-up round' if head.get('warmup') else ''}; "
           f"nano-graphrag {(head.get('peer_versions') or {}).get('nano-graphrag', '?')}). It ran: "
           "`bench.harness.systems`' runs per configuration" + "".join(f", `{current_command(c)}`" for c in subs) + "."]
    if missing:
        out += ["", "Not measured or failed in this run:", *missing]
    return out + [""]


def curve_table(rows: list[dict]) -> list[str]:
    """Mean tokens per global question (and their ratio to nano-graphrag's) against mean and worst coverage, for
    the default selection, the other allowances measured (``graphfleet@<share>``) and the full scan."""
    lines = [[corpus, system, f"{st['tokens']:,.0f}", f"{st['tokens'] / nano['tokens']:.3f}" if nano else "-",
              f"{st['map_calls']:.1f}", f"{st['coverage']:.0%}", f"{st['min_coverage']:.0%}"]
             for corpus, systems in global_cost(rows).items() for nano in [systems.get("nano")]
             for system, st in systems.items() if system != "nano" and st.get("coverage") is not None]
    if not lines:
        return []
    return ["### Global answer: cost against coverage", "",
            "Means over each corpus's questions: `graphfleet` is the default (`global_selection=auto`, allowance "
            f"`global_selection_share` {QueryParam().global_selection_share:g}), `graphfleet@<share>` the same with "
            "another allowance, `graphfleet-full` the full scan.", "",
            *md_table("corpus | system | tokens per question | / nano | map calls | coverage (mean) | coverage (worst)",
                      lines), ""]


def cost_section(all_rows: list[dict]) -> list[str]:
    """The section "Cost and latency per question (issue 21 table)" of docs/benchmarks.md."""
    rows = newest_run(all_rows)
    out = ["## Cost and latency per question (issue 21 table)", ""]
    if not rows:
        return out + no_results("cost_table")
    table = cost_rows(rows)
    out += [*_commands(rows),
            "| | graphfleet | nano-graphrag | ratio | target | met? |", "|---|---|---|---|---|---|",
            *(md_row([r.label, r.graphfleet, r.nano, r.ratio, r.target,
                      "-" if r.met is None else "yes" if r.met else "**no**"]) for r in table), ""]
    unmet = [r for r in table if r.met is False]
    if unmet:
        out += ["Unmet targets, by how much:", "", *(f"- {r.label}: {r.gap}." for r in unmet), ""]
    return [*out, *curve_table(rows), *note("cost_coverage"), *coverage_table(rows),
            "### Context build in-process", "", *context_table(rows)]
