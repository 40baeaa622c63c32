"""Issue 21's table renderer (bench/report/cost.py) and the critical path of bench/suites/cost_table.py, on synthetic
records: ratios, met / unmet against each target, rows without records shown as not measured."""

from __future__ import annotations

import pytest

from bench.report.cost import cost_rows, cost_section, newest_run
from bench.report.gateway import gateway_figures
from bench.suites import cost_table
from graphfleet_cli.stack import available_cores

RUN = {"run_id": "20261125T190000Z"}
INGEST_CALLS = {"extract": {"calls": 42, "prompt_tokens": 1, "completion_tokens": 42 * 1000},
                "glean_continue": {"calls": 42, "prompt_tokens": 1, "completion_tokens": 42 * 500},
                "summarize": {"calls": 12, "prompt_tokens": 1, "completion_tokens": 12 * 100},
                "community_report": {"calls": 49, "prompt_tokens": 1, "completion_tokens": 49 * 600}}


def ingest(system, latency, seconds, processes=1, ms_per_token=0.0):
    return {**RUN, "bench": "compare_median", "phase": "ingest", "system": system, "latency_ms": latency,
            "processes": processes, "ms_per_token": ms_per_token, "seconds_median": seconds,
            "calls_by_type": INGEST_CALLS}


def answer(system, latency, mode, seconds):
    return {**RUN, "bench": "compare_median", "phase": "query", "system": system, "latency_ms": latency,
            "processes": 1, "ms_per_token": 0.0, "mode": mode, "only_need_context": False, "seconds_median": seconds}


def by_label(rows):
    return {r.label: r for r in cost_rows(rows)}


def test_answer_rows_ratio_and_targets():
    rows = by_label([answer("graphfleet", 200.0, "global", 0.5), answer("nano", 200.0, "global", 0.25),
                     answer("graphfleet", 0.0, "local", 0.075), answer("nano", 0.0, "local", 0.059),
                     # a context-only record must not be taken for the answer
                     {**answer("graphfleet", 0.0, "local", 9.0), "only_need_context": True}])
    glob, local = rows["global answer at 200 ms (Carol)"], rows["local answer at 0 ms (Carol)"]
    assert (glob.ratio, glob.met) == ("2.00", False)
    assert "250 ms over" in glob.gap
    assert local.graphfleet == "0.075 s" and local.met is True  # 75 ms <= 59 + 20 ms, although 1.27x nano
    slow = by_label([answer("graphfleet", 0.0, "local", 0.085), answer("nano", 0.0, "local", 0.059),
                     answer("graphfleet", 0.0, "local@12000", 0.07)])
    assert slow["local answer at 0 ms (Carol)"].met is False
    same = slow["local answer at 0 ms (Carol), both at nano's max_total_tokens 12,000"]  # against nano's own local
    assert (same.graphfleet, same.nano, same.met) == ("0.070 s", "0.059 s", True)


def test_missing_records_render_not_measured():
    rows = cost_rows([])
    assert rows and all(r.met is None and r.graphfleet == "not measured" for r in rows if r.nano != "(in-process)")
    text = "\n".join(cost_section([{**RUN, "bench": "cost_run", "command": "python -m bench.cost_table"}]))
    assert "| yes |" not in text and "| **no** |" not in text
    assert text.count("not measured") >= 8
    # only nano measured: still no ratio and no verdict
    half = by_label([answer("nano", 200.0, "global", 0.25)])["global answer at 200 ms (Carol)"]
    assert (half.nano, half.graphfleet, half.ratio, half.met) == ("0.250 s", "not measured", "-", None)


def test_ingest_at_200_needs_both_targets():
    path = {**RUN, "bench": "critical_path", "latency_ms": 200.0, "ms_per_token": 0.0, "processes": 1,
            "seconds": 1.0, "waves": ["extract"] * 5, "waves_source": "stage timeline"}
    rows = [ingest("graphfleet", 200.0, 2.0), ingest("nano", 200.0, 5.0), ingest("graphfleet", 0.0, 1.7), path]
    row = by_label(rows)["ingest at 200 ms (Carol, 1 process)"]
    assert row.ratio.startswith("0.40") and "2.00× critical path" in row.ratio
    assert row.met is False  # 0.4x nano is met, 2.0x the critical path (> 1.5x) is not
    assert "0.50 s over" in row.gap and "critical path" in row.gap and "1.700 s" in row.gap  # the CPU floor
    assert "× nano" not in row.gap  # the ratio to nano is within its target
    rows[0] = ingest("graphfleet", 200.0, 1.4)
    assert by_label(rows)["ingest at 200 ms (Carol, 1 process)"].met is True
    # no critical path recorded: no verdict at 200 ms
    assert by_label(rows[:3])["ingest at 200 ms (Carol, 1 process)"].met is None


def test_ingest_rows_per_process_count_and_token_latency():
    rows = [ingest("graphfleet", 0.0, 2.0), ingest("graphfleet", 0.0, 2.4, processes=2), ingest("nano", 0.0, 2.7),
            ingest("graphfleet", 0.0, 30.0, ms_per_token=12.5), ingest("nano", 0.0, 90.0, ms_per_token=12.5)]
    table = by_label(rows)
    one, two = table["ingest at 0 ms (Carol, 1 process)"], table["ingest at 0 ms (Carol, 2 processes)"]
    assert (one.ratio, one.met) == ("0.74", True)  # <= 0.8x
    assert (two.ratio, two.met) == ("0.89", False)  # nano's run is shared by both process counts
    token = table["ingest at 12.5 ms per completion token (Carol, 1 process)"]
    assert (token.ratio, token.met) == ("0.33", False) and "≤ 0.3×" in token.target
    assert "below the critical path" not in token.gap and "takes 2.000 s" in token.gap  # the 0 ms run: CPU floor
    path = {**RUN, "bench": "critical_path", "latency_ms": 0.0, "ms_per_token": 12.5, "processes": 1,
            "seconds": 34.0, "waves": ["extract"] * 6, "waves_source": "stage timeline"}
    token = by_label([*rows, path])["ingest at 12.5 ms per completion token (Carol, 1 process)"]
    assert token.ratio == "0.33; 0.88× critical path"
    assert "target (27.000 s) is below the critical path (34.000 s)" in token.gap
    path.update(seconds=20.0, in_flight=16, in_flight_bound_s=60.0)
    token = by_label([*rows, path])["ingest at 12.5 ms per completion token (Carol, 1 process)"]
    assert "below the critical path" not in token.gap
    assert "below the time the same waves take with 16 calls in flight (60.000 s)" in token.gap


def test_ingest_rows_of_graphfleet_ups_default_come_after_the_counts():
    rows = [ingest("graphfleet", 0.0, 2.0, processes="auto"), ingest("graphfleet", 0.0, 2.4, processes=2),
            ingest("graphfleet", 0.0, 2.2), ingest("nano", 0.0, 2.7)]
    labels = [r.label for r in cost_rows(rows) if r.label.startswith("ingest at 0 ms")]
    assert labels == ["ingest at 0 ms (Carol, 1 process)", "ingest at 0 ms (Carol, 2 processes)",
                      "ingest at 0 ms (Carol, processes auto, `graphfleet up`'s default)"]
    auto = by_label(rows)[labels[-1]]
    assert (auto.graphfleet, auto.ratio, auto.met) == ("2.000 s", "0.74", True)


def test_gateway_and_first_query():
    recs = [{**RUN, "bench": "gateway_latency", "phase": "after_ingest", "first_s": 0.05, "warm_p50_s": 0.05,
             "warm_p95_s": 0.09, "warm_runs": 40,
             "warm_cpu_ms_per_query": {"gateway": 10.0, "query": 30.0, "redis": 4.0, "simulator": 35.0, "map": 0.0}},
            {**RUN, "bench": "gateway_latency", "phase": "fresh_stack", "first_s": 0.18, "warm_p50_s": 0.05,
             "warm_p95_s": 0.06, "warm_runs": 40}]
    table = by_label(recs)
    gw = table["local answer through the gateway, p50 / p95, 0 ms"]
    assert gw.met is False and "1.80× p50" in gw.gap and "p50" not in gw.gap.split("p95")[0]  # p50 50 ms is fine
    assert "graphfleet's processes 44 ms (gateway 10, query 30, redis 4), the LLM simulator 35 ms" in gw.gap
    fresh = table["first query on a fresh stack vs warm"]
    assert (fresh.met, fresh.ratio) == (False, "first/p50 3.60") and "120 ms" in fresh.gap
    assert table["first query after an ingestion vs warm"].met is True
    # records of another shape are not gateway phases
    assert gateway_figures([{"bench": "gateway_latency", "mode": "local", "p50": 0.04, "p95": 0.05, "n": 9}]) == {}


def fresh(trial, first, p95, first_own, own_p95):
    return {**RUN, "bench": "gateway_latency", "phase": "fresh_stack", "trial": trial, "first_s": first,
            "warm_p50_s": 0.07, "warm_p95_s": p95, "warm_runs": 40, "first_own_ms": first_own,
            "warm_own_ms_p50": 20.0, "warm_own_ms_p95": own_p95, "idle_s": 6.0, "idle_own_ms": [own_p95 + 1, 21.0]}


def test_first_query_over_several_fresh_stacks_is_judged_on_the_medians():
    # three restarts: the first query within the warm p95 in one of them, graphfleet's own time in two
    recs = [fresh(0, 0.100, 0.090, 30.0, 26.0), fresh(1, 0.080, 0.095, 22.0, 25.0),
            fresh(2, 0.097, 0.092, 24.0, 27.0)]
    fig = gateway_figures(recs)["fresh"]
    assert (fig["trials"], fig["within"], fig["own_within"]) == (3, 1, 2)
    assert (fig["first"], fig["p95"], fig["first_own"], fig["own_p95"]) == (0.097, 0.092, 24.0, 26.0)
    row = by_label(recs)["first query on a fresh stack vs warm"]
    assert row.met is False and row.graphfleet == "0.097 vs 0.070 s (3 stacks)"
    assert "first 97 ms vs warm p95 92 ms: 5 ms" in row.gap
    assert "medians of 3 stacks; within the warm p95 in 1 of 3" in row.gap
    assert "first 24 ms vs warm p95 26 ms, within it in 2 of 3 stacks" in row.gap
    assert "after 6 s idle, outside its LLM call: median 24 ms, up to 28 ms (6 queries)" in row.gap
    recs[0].update(first_s=0.085)  # now within in two stacks, and the median first (0.085) within the median p95
    assert by_label(recs)["first query on a fresh stack vs warm"].met is True


def test_first_query_after_several_ingestions_is_judged_on_the_medians_and_named_so():
    # three tenants' ingestions on one stack (bench.gateway_latency --ingestions 3): one sample per ingestion
    recs = [{**fresh(trial, first, p95, own, own_p95), "phase": "after_ingest", "tenant": f"lat-{trial}"}
            for trial, first, p95, own, own_p95 in ((0, 0.110, 0.090, 31.0, 26.0), (1, 0.094, 0.092, 27.0, 25.0),
                                                    (2, 0.080, 0.095, 22.0, 27.0))]
    fig = gateway_figures(recs)["ingest"]
    assert (fig["trials"], fig["within"], fig["own_within"], fig["first"], fig["p95"]) == (3, 1, 1, 0.094, 0.092)
    table = by_label(recs)
    row = table["first query after an ingestion vs warm"]
    assert row.met is False and row.graphfleet == "0.094 vs 0.070 s (3 ingestions)"
    assert "medians of 3 ingestions; within the warm p95 in 1 of 3" in row.gap
    assert "first 27 ms vs warm p95 26 ms, within it in 1 of 3 ingestions" in row.gap
    # the warm queries of the same phases make the gateway row: medians over the phases, and said so
    gw = table["local answer through the gateway, p50 / p95, 0 ms"]
    assert gw.graphfleet == "0.070 / 0.092 s (n=40 per phase, medians of 3 phases)"


@pytest.mark.parametrize(("tokens", "coverage", "met"), [(30_000, 0.95, True), (30_000, 0.8, False),
                                                         (60_000, 0.95, False)])
def test_global_tokens_target(tokens, coverage, met):
    recs = [{**RUN, "bench": "global_cost", "corpus": "musique", "question": q, "system": "graphfleet",
             "tokens": tokens, "calls": 5, "map_calls": 4, "reduce_calls": 1, "coverage": coverage} for q in "ab"]
    recs += [{**RUN, "bench": "global_cost", "corpus": "musique", "question": q, "system": "nano",
              "tokens": 400_000, "calls": 99, "map_calls": 98, "reduce_calls": 1, "coverage": None} for q in "ab"]
    row = by_label(recs)["global answer, LLM tokens per question, musique"]
    assert row.met is met and row.ratio == f"{tokens / 400_000:.3f}"
    text = "\n".join(cost_section(recs))
    assert f"| musique | a | {tokens:,} | 5 (4 / 1) | {coverage:.0%} | not measured | not measured | 400,000 | 99 |" \
        in text


def test_newest_run_only():
    old = {**answer("graphfleet", 0.0, "local", 9.0), "run_id": "20261124T000000Z"}
    assert newest_run([old, answer("graphfleet", 0.0, "local", 0.07)])[0]["seconds_median"] == 0.07


def test_critical_path_waves_from_the_stage_timeline():
    cfg = {"latency_ms": 200.0, "ms_per_token": 0.0, "processes": 1}
    med = [{"bench": "compare_median", "phase": "ingest", "system": "graphfleet", "seconds_median": 3.0,
            "calls_by_type": INGEST_CALLS}]
    run = {"bench": "compare_ingest", "system": "graphfleet",
           "stage_times": {"extract": 0.1, "report:wave0": 2.0, "report:wave1": 2.5, "report:wave2": 2.9}}
    with_timeline = cost_table.critical_path(cfg, med, [run])
    assert with_timeline["waves"] == ["extract", "glean_continue", "summarize"] + ["community_report"] * 3
    assert with_timeline["seconds"] == pytest.approx(1.2) and with_timeline["ratio"] == 2.5
    assert cost_table.critical_path(cfg, med, [])["seconds"] == pytest.approx(1.0)  # the 5 x latency
    per_token = cost_table.critical_path({**cfg, "latency_ms": 0.0, "ms_per_token": 10.0}, med, [run])
    # extract 1000 + glean 500 + summary 100 + 3 reports x 600 completion tokens per average call, 10 ms each
    assert per_token["seconds"] == pytest.approx(34.0)
    assert cost_table.critical_path({**cfg, "latency_ms": 0.0}, med, [run]) is None  # no latency, no path
    # 16 in flight: extract 42 calls = 3 rounds of 10 s, glean 3 x 5 s, summaries 1 x 1 s, reports 49 over the
    # timeline's 3 waves = 17 per wave, 2 rounds of 6 s each: 30 + 15 + 1 + 3 x 2 x 6 = 82 s
    bounded = cost_table.critical_path({**cfg, "latency_ms": 0.0, "ms_per_token": 10.0}, med, [run], in_flight=16)
    assert bounded["seconds"] == pytest.approx(34.0) and bounded["in_flight_bound_s"] == pytest.approx(82.0)
    assert cost_table.critical_path({**cfg, "latency_ms": 0.0, "ms_per_token": 10.0}, med, [run],
                                    in_flight=64)["in_flight_bound_s"] == pytest.approx(34.0)
    two_rounds = {**INGEST_CALLS, "glean_continue": {"calls": 84, "prompt_tokens": 1, "completion_tokens": 84},
                  "glean_loop": {"calls": 42, "prompt_tokens": 1, "completion_tokens": 42}}
    waves, _ = cost_table._waves(two_rounds, run["stage_times"])
    assert waves[:4] == ["extract", "glean_continue", "glean_continue", "glean_loop"] and len(waves) == 8


def test_quick_configs():
    args = cost_table.parse_args(["--quick"])
    cfgs = cost_table.configs(args)
    assert {c["latency_ms"] for c in cfgs} == {0.0} and args.repeat == 1 and args.ms_per_completion_token is None
    assert [c["systems"] for c in cfgs] == [["graphfleet", "nano"], ["graphfleet"], ["graphfleet"]]
    full = cost_table.configs(cost_table.parse_args([]))
    assert {(c["latency_ms"], c["ms_per_token"], c["processes"]) for c in full} == {
        (lat, mt, p) for lat, mt in ((0.0, 0.0), (200.0, 0.0), (0.0, 12.5)) for p in (1, 2, "auto")}
    assert cost_table.parse_args(["--processes", "auto", "3"]).processes == ["auto", 3]
    with pytest.raises(SystemExit):
        cost_table.parse_args(["--processes", "0"])
    assert cost_table.ingest_processes(3) == 3 and cost_table.ingest_processes("auto") == available_cores()
    assert not [c for c in cost_table.configs(cost_table.parse_args(["--ms-per-completion-token", "0"]))
                if c["ms_per_token"]]


def test_sub_bench_options_and_missing_bench(monkeypatch):
    monkeypatch.setattr(cost_table, "_help", lambda module: "usage: [--repeat N] [--peers-python P] [--latency MS]")
    quick, full = cost_table.parse_args(["--quick", "--peers-python", "/p"]), cost_table.parse_args(["--repeat", "9"])
    bench = cost_table.SubBench("bench.x", ("--latency", "0"), ("--corpora", "carol", "--repeat", "5"))
    # --corpora is not in this bench's --help: left out with its value
    assert cost_table.sub_bench_args(bench, quick) == ["--latency", "0", "--peers-python", "/p", "--repeat", "5"]
    assert "--repeat" not in cost_table.sub_bench_args(bench, full)  # a full run keeps the bench's own
    monkeypatch.setattr(cost_table, "_module_exists", lambda module: False)
    recs = cost_table.run_sub_bench("global_tokens", quick, {"run_id": "r"})
    assert [(r["bench"], r["row"], r["run_id"]) for r in recs] == [("cost_missing", "global_tokens", "r")]
    row = by_label(recs)["global answer, LLM tokens per question, ~2,000-passage corpus"]
    assert row.met is None and row.graphfleet == "not measured"


def test_failures_are_listed_not_counted():
    recs = [{**RUN, "bench": "cost_run", "command": "python -m bench.cost_table", "quick": True},
            {**RUN, "bench": "compare_error", "system": "nano", "row": "carol_200ms_p1", "run": 0,
             "stderr": "Traceback\nRuntimeError: boom"},
            {**RUN, "bench": "cost_missing", "row": "context_build", "module": "bench.context_build",
             "reason": "exit 1 after 3 s: Traceback\nImportError: x"},
            answer("graphfleet", 200.0, "global", 0.2)]
    text = "\n".join(cost_section(recs))
    assert "- `compare_error`: nano in `carol_200ms_p1`, run 0 failed: RuntimeError: boom" in text
    assert "- `context_build` (bench.context_build): ImportError: x" in text
    assert "**Quick run**" in text
    assert "| global answer at 200 ms (Carol) | 0.200 s | not measured | - | ≤ 1.0× nano | - |" in text


def test_bench_record_shapes_of_global_cost_and_context_build():
    def gc(corpus, q, system, tokens, coverage=None, status="succeeded"):
        return {**RUN, "bench": "global_cost", "corpus": corpus, "question": q, "system": system, "status": status,
                "tokens": tokens, "calls": 3, "map_calls": 2, "reduce_calls": 1, "coverage": coverage}

    recs = [{**RUN, "bench": "global_cost_ingest", "corpus": "carol", "system": "graphfleet", "documents": 1},
            {**RUN, "bench": "global_cost_ingest", "corpus": "musique", "system": "graphfleet", "documents": 2000},
            gc("carol", "a", "graphfleet", 1000, 1.0), gc("carol", "a", "nano", 40_000),
            gc("musique", "a", "graphfleet", 20_000, 0.9), gc("musique", "b", "graphfleet", 10**9, 0.0, "failed"),
            gc("musique", "a", "nano", 400_000), gc("musique", "a", "graphfleet-full", 350_000, 1.0),
            {**RUN, "bench": "context_build", "system": "graphfleet", "mode": "local", "max_total_tokens": 12000,
             "seconds_median": 0.012, "seconds_p95": 0.015, "context_tokens": 11000},
            {**RUN, "bench": "context_build", "system": "nano", "mode": "local", "max_total_tokens": 12000,
             "seconds_median": 0.008, "seconds_p95": 0.009, "context_tokens": 11900}]
    table = cost_rows(recs)
    assert table[0].label == "global answer, LLM tokens per question, musique, 2,000 passages"  # largest first
    assert (table[0].ratio, table[0].met) == ("0.050", True)  # the failed question is left out of the mean
    assert table[1].label.endswith("per question, carol") and table[1].ratio == "0.025"
    text = "\n".join(cost_section(recs))
    assert "| musique | a | 20,000 | 3 (2 / 1) | 90% | 350,000 | 3 | 400,000 | 3 | 0.050 |" in text
    assert "| local | 12,000 | 12.0 / 15.0 | 11,000 | 8.0 / 9.0 | 11,900 | 1.50 |" in text
    assert "| local | 30,000 |" not in text


def test_the_measured_llm_path_split_is_carried_to_the_critical_path_and_its_gap():
    from bench.harness.llm_calls import union_s

    # calls [0, 1], [0.5, 1.5], [3, 4] within [0, 5]: in flight 2.5 s; clipped to the wall time
    assert union_s([(0.5, 1.5), (0.0, 1.0), (3.0, 4.0)], 0.0, 5.0) == pytest.approx(2.5)
    assert union_s([(-1.0, 0.5), (4.5, 9.0), (1.0, 1.0)], 0.0, 5.0) == pytest.approx(1.0)
    assert union_s([], 0.0, 5.0) == 0.0 and union_s([(0.0, 1.0), (0.2, 0.4)], 0.0, 5.0) == pytest.approx(1.0)
    from types import SimpleNamespace as Rec

    from bench.harness.llm_calls import in_flight_s

    calls = [Rec(ts=1.0, latency_s=1.0), Rec(ts=1.5, latency_s=1.0), Rec(ts=4.0, latency_s=1.0)]  # as usage records
    assert in_flight_s(calls) == pytest.approx(2.5) and in_flight_s(calls, 0.0, 0.75) == pytest.approx(0.75)
    assert in_flight_s([]) == 0.0
    cfg = {"latency_ms": 200.0, "ms_per_token": 0.0, "processes": 1}
    med = [{"bench": "compare_median", "phase": "ingest", "system": "graphfleet", "seconds_median": 2.0,
            "calls_by_type": INGEST_CALLS, "llm_in_flight_s": 1.6, "llm_idle_s": 0.4, "simulator_cpu_s": 0.8}]
    path = cost_table.critical_path(cfg, med, [])
    assert (path["llm_in_flight_s"], path["llm_idle_s"], path["simulator_cpu_s"]) == (1.6, 0.4, 0.8)
    rows = [ingest("graphfleet", 200.0, 2.0), ingest("nano", 200.0, 5.0), {**RUN, **path, **cfg}]
    gap = by_label(rows)["ingest at 200 ms (Carol, 1 process)"].gap
    assert "in flight for 1.600 s" in gap and "none for 0.400 s" in gap and "0.800 s of CPU" in gap
    without = cost_table.critical_path(cfg, [{k: v for k, v in med[0].items() if not k.startswith(("llm", "sim"))}],
                                       [])
    assert "llm_idle_s" not in without  # an older run without the split renders as before
    assert "in flight" not in by_label([*rows[:2], {**RUN, **without, **cfg}])[
        "ingest at 200 ms (Carol, 1 process)"].gap


def test_critical_path_from_the_longest_answers_per_stage():
    """Recorded answers per stage: each wave lasts at least its longest call; at 0 ms per token every call is the
    latency, so the path is the waves times the latency whatever the answers."""
    cfg = {"latency_ms": 0.0, "ms_per_token": 10.0, "processes": 1}
    med = [{"bench": "compare_median", "phase": "ingest", "system": "graphfleet", "seconds_median": 60.0,
            "calls_by_type": INGEST_CALLS}]
    stages = {"extract": {"completion_min": 200, "completion_max": 4000},
              "glean": {"completion_min": 10, "completion_max": 900},
              "summarize": {"completion_min": 50, "completion_max": 150},
              "report": {"completion_min": 300, "completion_max": 1500},
              "embed": {"completion_min": 0, "completion_max": 0}}
    run = {"bench": "compare_ingest", "system": "graphfleet", "llm_stages": stages,
           "stage_times": {"extract": 0.1, "report:wave0": 2.0, "report:wave1": 2.5}}
    path = cost_table.critical_path(cfg, med, [run])
    # chunk: 4000 + 10 (not 200 + 900); summaries 150; reports 1500 + 300; at 10 ms per token
    assert path["longest_calls"] is True and path["seconds"] == pytest.approx(59.6)
    assert path["average_waves_s"] == pytest.approx(15 + 1 + 12) and path["ratio"] == pytest.approx(1.01)
    flat = cost_table.critical_path({**cfg, "latency_ms": 200.0, "ms_per_token": 0.0}, med, [run])
    assert flat["seconds"] == pytest.approx(1.0)  # extract, glean, summary, 2 report waves at 200 ms
    # a stage without its answers recorded: the average calls' sum, as before
    partial = {**run, "llm_stages": {k: v for k, v in stages.items() if k != "report"}}
    assert cost_table.critical_path(cfg, med, [partial])["longest_calls"] is False
    # the report names the bound, and a target below it is out of reach for any schedule
    rows = [ingest("graphfleet", 0.0, 60.0, ms_per_token=10.0), ingest("nano", 0.0, 150.0, ms_per_token=10.0),
            {**RUN, **path, "latency_ms": 0.0, "ms_per_token": 10.0, "processes": 1}]
    token = by_label(rows)["ingest at 10 ms per completion token (Carol, 1 process)"]
    assert "target (45.000 s) is below the critical path (59.600 s)" in token.gap
    assert "the average calls' sum 28.000 s" in "\n".join(cost_section(rows))


def test_stage_spans_record_the_shortest_and_longest_answer():
    from bench.harness.llm_calls import stage_spans
    from shared.domain.models import UsageRecord

    recs = [UsageRecord(tenant="t", stage=stage, model="m", completion_tokens=n, latency_s=0.2, ts=10.0 + i)
            for i, (stage, n) in enumerate([("extract", 900), ("extract", 4000), ("glean", 12), ("extract", 300)])]
    spans = stage_spans(recs, started=9.0)
    assert (spans["extract"]["completion_min"], spans["extract"]["completion_max"]) == (300, 4000)
    assert spans["glean"] == {"calls": 1, "first_sent": pytest.approx(2.8), "last_answered": pytest.approx(3.0),
                              "call_p50_s": 0.2, "call_max_s": 0.2, "completion_min": 12, "completion_max": 12}
