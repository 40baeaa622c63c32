"""The retrieval benchmark's baselines and report (bench/harness/retrieval_baselines.py, the answer match in
bench/harness/retrieval_records.py, bench/report/retrieval_sets.py): answer-in-context's normalisation and
whole-word match, the no-graph baselines packed into the same allowance (the real local embedder), the targets
and the report tables. No stack."""

from __future__ import annotations

import pytest

from bench.harness.datasets import Dataset, gold_answers
from bench.harness.retrieval_baselines import BUDGET_MODEL, Baselines, Ranking, hybrid
from bench.harness.retrieval_records import answer_in_context, mode_stats, normalize, question_record
from bench.report.retrieval_sets import set_target, sets_tables
from shared.domain.retrieval.fusion import zscore
from shared.domain.tokens import count_tokens


# ------------------------------------------------------------------ answer-in-context
def test_answers_are_squad_normalised_and_matched_as_whole_words_in_csv_contexts():
    assert normalize('The U.S. Army\'s "Blue" band!') == "us armys blue band"
    assert normalize("Jean-Paul, a spirit", " ") == "jean paul spirit"
    csv_row = 'id,entity,type,description\n12,Ann Lee,PERSON,"Leader of ""the"" Green Party"'
    assert answer_in_context(csv_row, ["Ann Lee"])  # "12,Ann" glues to "12ann" once punctuation is removed
    assert answer_in_context(csv_row, ["green party"]) and answer_in_context("Lilu is a spirit.", ["a spirit"])
    assert answer_in_context("population 6,960 in 2010", ["6,960"])
    assert answer_in_context("Jean Paul Sartre", ["Jean-Paul Sartre"])
    assert not answer_in_context("the annual leeway", ["Ann Lee"])  # inside other words: not the answer
    assert not answer_in_context("Ann met Lee", ["Ann Lee"])
    assert answer_in_context("the Baltimore Orioles won", ["Pittsburgh Pirates", "Orioles"])  # an alias counts
    for answers in (["yes"], ["No."], [], [""], ["The"]):
        assert answer_in_context("yes no the", answers) is None  # left out, not a miss


def test_gold_answers_take_the_answer_and_musiques_aliases_and_stats_count_only_the_counted():
    assert gold_answers({"answer": "Pittsburgh Pirates", "answer_aliases": ["Pirates"]}) == [
        "Pittsburgh Pirates", "Pirates"]
    assert gold_answers({"answer": "yes"}) == ["yes"] and gold_answers({"question": "?"}) == []
    head = {"set": "s", "llm": False, "system": "bm25", "mode": "bm25"}
    recs = [question_record(head, {"qid": str(i), "gold": [], "answers": answers}, "Ann Lee leads.", {})
            for i, answers in enumerate((["Ann Lee"], ["Bo"], ["yes"]))]
    assert [r["answer_in_context"] for r in recs] == [True, False, None]
    stats = mode_stats(recs, 4000)
    assert (stats["answer_in_context"], stats["answer_questions"]) == (0.5, 2)


# ------------------------------------------------------------------ the no-graph baselines
def test_hybrid_is_zscore_fusion_of_both_lists_at_the_bm25_weight_cut_to_top_k():
    keyword, dense = [("a", 9.0), ("b", 1.0)], [("c", 0.9), ("b", 0.8), ("a", 0.1)]
    assert hybrid(keyword, dense, 0.3, 10) == [k for k, _ in zscore([keyword, dense], [0.3, 0.7])]
    assert hybrid(keyword, dense, 1.0, 2) == ["a", "b"] and len(hybrid(keyword, dense, 0.5, 2)) == 2


def test_baselines_rank_once_and_pack_into_the_allowance_they_are_given():
    passages = {f"P{i}": f"filler text number {i} about nothing much " * 12 for i in range(20)}
    passages["Car"] = "The automobile was parked outside the station all night."
    ds = Dataset("t", [{"qid": "a", "question": "where was the car parked", "gold": ["Car"], "answers": ["outside"]}],
                 passages, {k: k for k in passages})
    base = Baselines(ds.docs, top_k=300, bm25_weight=0.5)
    assert base.embed_cost["passages"] == 21 and base.embed_cost["cpu_seconds"] >= 0
    ranked = base.rank_all(ds.questions)
    assert set(ranked) == {"bm25", "hybrid_baseline", "dense"}
    dense, fused = ranked["dense"]["a"], ranked["hybrid_baseline"]["a"]
    assert isinstance(dense, Ranking) and sorted(dense.keys) == sorted(passages)  # cosine ranks every document
    assert set(fused.keys) == set(ranked["bm25"]["a"].keys) | set(dense.keys) and fused.ms >= dense.ms
    for name in ("hybrid_baseline", "dense"):
        head = {"set": "t", "llm": False, "system": name, "mode": name}
        rec, = base.records(ds, head, ranked[name], {"a": (250, "naive")}, 4000)
        context, kept = base.pack(ranked[name]["a"].keys, 250)
        assert rec["context_tokens"] == count_tokens(context, BUDGET_MODEL) <= 250 and len(kept) > 1
        assert (rec["allowance"], rec["allowance_from"], rec["system"]) == (250, "naive", name)
        assert rec["context_ms"] >= ranked[name]["a"].ms and rec["answer_in_context"] == ("outside" in context)


# ------------------------------------------------------------------ the targets and the report
@pytest.mark.parametrize(("best", "hybrid_", "met"), [(0.90, 0.85, True), (0.89, 0.85, False), (0.98, 0.96, True),
                                                     (0.975, 0.96, False), (1.0, 1.0, True), (0.99, 0.95, False)])
def test_a_set_target_is_five_points_or_half_the_gap_above_095(best, hybrid_, met):
    assert set_target(best, hybrid_)[0] is met


def _stats(recall: float, answer: float | None = 0.5, over: int = 0, ms: float | None = 40.0, q: int = 10) -> dict:
    return {"questions": q, "recall": recall, "answer_in_context": answer, "answer_questions": q - 1,
            "allowance_median": 3600, "allowance_used_median": 0.9, "context_tokens_median": 3300,
            "over_budget": over, "seconds_p50": 0.05, "context_ms_p50": ms}


def _summary(set_, modes: dict, hybrid_: float, llm: bool = True, system: str = "graphfleet", q: int = 10,
             passages: int = 1000) -> dict:
    out = {"bench": "retrieval_set", "set": set_, "llm": llm, "system": system, "questions": q,
           "passages": passages, "budget": 4000, "budget_encoding": "cl100k_base", "hybrid_bm25_weight": 0.5,
           "modes": {m: _stats(*v) if isinstance(v, tuple) else _stats(v, q=q) for m, v in modes.items()}}
    if system == "graphfleet":
        out |= {"bm25": _stats(hybrid_ - 0.05, q=q), "bm25_full": _stats(hybrid_ - 0.04, q=q),
                "hybrid_baseline": _stats(hybrid_, 0.6, q=q), "dense": _stats(hybrid_ - 0.1, q=q)}
    return out


def test_report_tables_judge_the_best_graph_mode_against_the_hybrid_baseline():
    rows = [{"bench": "machine"},
            _summary("musique", {"local": 0.1}, 0.2),  # superseded by the newer record below
            _summary("hotpotqa", {"local": 0.97, "naive": 0.95, "graph": (0.99, 0.8, 0, 150.0)}, 0.96),
            _summary("musique", {"local": 0.78, "naive": 0.68, "local [k9]": 0.99}, 0.70, q=292, passages=4543),
            _summary("hotpotqa", {"local": 0.5}, 0.9, system="nano"),
            _summary("hotpotqa", {"naive": (0.8, None, 2)}, 0.9, llm=False),
            {"bench": "retrieval_set_ingest", "set": "hotpotqa", "llm": True, "system": "graphfleet", "passages": 994,
             "seconds": 80.5, "llm_calls": 3000, "prompt_tokens": 9000, "completion_tokens": 1000, "entities": 7,
             "relations": 9, "embedding": {"calls": 12, "input_tokens": 5000, "latency_s": 3.0, "wall_s": 2.0,
                                           "models": ["m"], "passages_per_s": 497.0},
             "embed_in_process": {"passages_per_s": 600.0, "cpu_seconds": 1.5}}]
    text = "\n".join(sets_tables(rows))
    sim, none = text.split("**no LLM")
    lines = [line for line in sim.splitlines() if line.startswith("| ")]
    assert lines[0] == ("| mode | hotpotqa (10 q) | musique (292 q) | macro | macro − BM25 "
                        "| macro − hybrid baseline |")
    assert lines[1:5] == ["| BM25 (same allowance) | 0.910 | 0.650 | 0.780 | - | - |",
                          "| BM25 (full budget) | 0.920 | 0.660 | 0.790 | - | - |",
                          "| hybrid baseline: BM25 + dense (same allowance) | 0.960 | 0.700 | 0.830 | - | - |",
                          "| dense (same allowance) | 0.860 | 0.600 | 0.730 | - | - |"]
    assert "| local | 0.970 | 0.780 | 0.875 | +0.095 | +0.045 |" in sim
    assert "| local [k9] | - | 0.990 | - | - | - |" in sim and "| nano-graphrag local | 0.500 | - | - | - | - |" in sim
    assert "| mode | hotpotqa (9 q) | musique (291 q) | macro | macro − hybrid baseline |" in sim
    assert "| hybrid baseline: BM25 + dense (same allowance) | 0.600 | 0.600 | 0.600 | - |" in sim
    # hotpotqa: hybrid 0.96 leaves 0.04, graph's 0.99 closes it more than half; musique: local +8 points; the
    # macro's best single mode (local, 0.875) is only +4.5 points; the variant is no candidate
    assert "| best graph mode | 0.990 (graph) | 0.780 (local) | 0.875 (local) |" in sim
    assert "| judged | met | met | **not met** |" in sim
    assert "- naive ≥ hybrid − 1 point on every set: **not met** (musique (0.680 vs 0.700))" in sim
    assert "- 0 contexts over budget: met" in sim and "- answer-in-context for every mode and baseline: met" in sim
    assert "**not met** (slowest: graph 150.0 ms on hotpotqa); over: graph 150.0 ms on hotpotqa" in sim
    assert "40.0 ms on musique (4,543 passages)" in sim.split("not judged: ")[1]  # the target is for ≤ 2,000
    assert "| hotpotqa | graphfleet | 994 | 80.5 | 3,000 | 10,000 | 12 | 5,000 | 3.0 / 2.0 | 497 | 600 | 1.50 " in sim
    assert "- 0 contexts over budget: **not met** (naive: 2)" in none
    assert "**not met** (missing: naive (hotpotqa))" in none
    assert sets_tables([{"bench": "retrieval_summary", "llm": True}])[0].startswith("(no results yet")
