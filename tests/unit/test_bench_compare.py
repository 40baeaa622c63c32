"""The side-by-side benchmark's pure parts: per-phase simulator deltas, medians, the report tables and the
20x corpus's renamed copies (bench/harness/systems.py, bench/harness/peers/peer_run.py, bench/report/,
bench/suites/scaling.py)."""

from __future__ import annotations

from bench.harness.peers.peer_run import delta
from bench.harness.systems import medians, question, schedule
from bench.report.compare import by_stage, compare_tables
from bench.report.tables import scaling_table
from bench.suites.context_build import case_plan
from bench.suites.scaling import renamed
from shared.domain.extraction.fast_extractor import extract_chunk_fast


def stats(calls: dict[str, int], emb: int) -> dict:
    by_type = {k: {"calls": n, "prompt_tokens": 100 * n, "completion_tokens": 10 * n} for k, n in calls.items()}
    total = sum(calls.values())
    return {"chat": {"calls": total, "prompt_tokens": 100 * total, "completion_tokens": 10 * total,
                     "by_type": by_type},
            "embeddings": {"calls": emb, "inputs": 3 * emb, "tokens": 0}}


def test_delta_counts_only_the_phase():
    before = stats({"extract": 2, "summarize": 1}, 1)
    after = stats({"extract": 5, "summarize": 1, "nano_global_map": 3}, 4)
    d = delta(before, after)
    assert d["llm_calls"] == 6 and d["prompt_tokens"] == 600 and d["embedding_calls"] == 3
    assert d["calls_by_type"] == {"extract": {"calls": 3, "prompt_tokens": 300, "completion_tokens": 30},
                                  "nano_global_map": {"calls": 3, "prompt_tokens": 300, "completion_tokens": 30}}


def test_every_query_text_is_new_so_no_cache_answers():
    texts = {question(m, run, only) for m in ("local", "global") for run in range(3) for only in (True, False)}
    assert len(texts) == 12


def _ingest(system, seconds, run):
    return {"bench": "compare_ingest", "system": system, "latency_ms": 0.0, "run": run, "status": "succeeded",
            "seconds": seconds, "llm_calls": 10, "prompt_tokens": 1000, "completion_tokens": 100,
            "calls_by_type": {"extract": {"calls": 10}}, "embedding_calls": 2, "embedding_inputs": 5,
            "entities": 7, "relations": 9, "communities": 3, "communities_by_level": {"0": 3}}


def test_medians_and_tables_show_ratios_graphfleet_over_peer():
    rows = [_ingest("graphfleet", s, i) for i, s in enumerate((3.0, 1.0, 2.0))]
    rows += [_ingest("nano", s, i) for i, s in enumerate((4.0, 5.0, 4.5))]
    rows += [{"bench": "compare_query", "system": sys_, "latency_ms": 0.0, "run": 0, "mode": "local",
              "only_need_context": True, "seconds": s, "status": "succeeded", "context_tokens": 50,
              "llm_calls": 0, "prompt_tokens": 0, "calls_by_type": {}, "embedding_calls": 1}
             for sys_, s in (("graphfleet", 0.2), ("nano", 0.1))]
    med = medians(rows)
    gf = next(m for m in med if m["system"] == "graphfleet" and m["phase"] == "ingest")
    assert gf["seconds_median"] == 2.0 and gf["seconds_all"] == [3.0, 1.0, 2.0]
    table = "\n".join(compare_tables([{"bench": "machine", "repeat": 3}, *med]))
    nano_row = next(line for line in table.splitlines() if line.startswith("| 0 ms | nano-graphrag"))
    assert "| 4.50 |" in nano_row and "| 0.44 |" in nano_row  # 2.0 / 4.5
    query_row = next(line for line in table.splitlines() if "| local |" in line)
    assert "| 0.200 | 0.100 | 2.00 |" in query_row


def test_warm_up_rounds_come_first_and_no_system_always_runs_first():
    order = schedule(["graphfleet", "nano"], repeat=3, warmup=1)
    assert order == [(0, "graphfleet", True), (0, "nano", True), (1, "nano", False), (1, "graphfleet", False),
                     (2, "graphfleet", False), (2, "nano", False), (3, "nano", False), (3, "graphfleet", False)]
    assert schedule(["graphfleet"], repeat=2, warmup=0) == [(0, "graphfleet", False), (1, "graphfleet", False)]


def test_medians_leave_out_the_warm_up_runs():
    rows = [{**_ingest("graphfleet", 9.0, 0), "warmup": True}, _ingest("graphfleet", 2.0, 1),
            _ingest("graphfleet", 4.0, 2)]
    gf = next(m for m in medians(rows) if m["phase"] == "ingest")
    assert gf["runs"] == 2 and gf["seconds_median"] == 3.0 and gf["seconds_all"] == [2.0, 4.0]


def test_stages_group_each_systems_prompt_kinds():
    assert by_stage({"nano_extract": {"calls": 4}, "lightrag_glean": {"calls": 2}, "glean_continue": {"calls": 1},
                     "community_report": {"calls": 3}, "nano_global_map": {"calls": 2}}) == \
        "extract 4, glean 3, report 3, map 2"


def test_renamed_copies_make_new_names_and_keep_lower_case_text():
    text = "Scrooge met Bob Cratchit in London. it was cold."
    assert renamed(text, 3) == "Scrooge-cd met Bob-cd Cratchit-cd in London-cd. it was cold."


def test_each_renamed_copy_is_new_entities_to_the_llm_free_extractor():
    text = "Ebenezer Scrooge met Jacob Marley in London. Scrooge and Marley were partners in London."
    names = [{e.name for e in extract_chunk_fast(renamed(text, copy), f"c{copy}", "d").entities} for copy in (1, 2, 12)]
    assert "LONDON-CB" in names[0] and "LONDON-CBC" in names[2]
    assert not names[0] & names[1] and not names[1] & names[2] and not names[0] & names[2]


def test_scaling_table_reports_speed_up_against_one_process_at_the_same_latency():
    timings = {0.0: ((1, 4.0), (2, 2.5)), 200.0: ((1, 8.0), (2, 4.0))}
    med = [{"bench": "scaling_median", "corpus": "carol", "processes": p, "latency_ms": lat, "documents": 1,
            "tokens": 1000, "chunks": 40, "seconds_median": s, "chunks_per_s_median": 40 / s}
           for lat, pairs in timings.items() for p, s in pairs]
    runs = [{"bench": "scaling", "corpus": "carol", "processes": p, "latency_ms": lat, "llm_calls": 100,
             "entities": 5, "relations": 6} for lat in timings for p in (1, 2)]
    table = "\n".join(scaling_table(med + runs))
    assert "| carol | 0 ms | 1 | 1,000 | 40 | 2 | 2.5 | 16.0 | 1.60 |" in table
    assert "| carol | 200 ms | 1 | 1,000 | 40 | 2 | 4.0 | 10.0 | 2.00 |" in table


def test_each_context_build_case_asks_questions_no_earlier_case_asked():
    cases = [questions for _mode, _budget, questions in case_plan(["local", "naive"], [12000, 30000], repeat=5)]
    assert all(len(c) == 6 for c in cases)
    assert len({q for c in cases for q in c}) == 24
