"""The retrieval-quality harness's pure parts (bench/harness/datasets.py, bench/harness/retrieval_records.py,
bench/suites/retrieval.py): the four public sets' loaders, recall on CSV-quoted contexts, the chunk -> passage
map, BM25's allowance and packing, the per-question record, the set summary, the macro average and the
options (the baselines, answer-in-context and the report tables: test_retrieval_baselines.py). No stack."""

from __future__ import annotations

import argparse
import csv
import io
import json
import re
from collections import Counter

import pytest

from bench.harness.datasets import DATA_ROOT, Dataset, _question_passages, load_files, load_named_set
from bench.harness.retrieval_baselines import BUDGET_MODEL, Bm25, Ranking
from bench.harness.retrieval_records import (
    bm25_allowances,
    chunk_passage_map,
    graphfleet_keys,
    mode_stats,
    question_record,
    recall,
    set_summary,
)
from bench.suites.retrieval import DEFAULT_MODES, parse_args, parse_variant
from shared.domain.tokens import count_tokens

QUESTIONS = [
    {"_id": "q1", "question": "Which river flows through the capital of Zedland?", "answer": "Blue",
     "supporting_facts": [["Zedland", 0], ["Blue River", 1], ["Zedland", 1]],
     "context": [["Zedland", ["Zedland is a country.", " Its capital is Ora."]],
                 ["Blue River", ["The Blue River is long.", " It flows through Ora."]],
                 ["Moon", ["The Moon orbits the Earth."]]]},
]
MUSIQUE = {"id": "2hop__1", "question": "Who leads the party of Ann Lee?", "answer": "Bo Chen", "paragraphs": [
    {"idx": 0, "title": "Ann Lee", "paragraph_text": "Ann Lee is a member of the Green Party.", "is_supporting": True},
    {"idx": 1, "title": "Green Party", "paragraph_text": "The Green Party was founded in 1990.",
     "is_supporting": False},
    {"idx": 2, "title": "Green Party", "paragraph_text": "Bo Chen leads the Green Party.", "is_supporting": True},
    {"idx": 3, "title": "Moon", "paragraph_text": "The Moon orbits the Earth.", "is_supporting": False}]}
WIKI = {"_id": "w1", "question": "Who is older, Ann or Bo?", "supporting_facts": [["Ann", 0], ["Bo", 0]],
        "context": [["Ann", ["Ann was born in 1950.", "She sings."]], ["Bo", ["Bo was born in 1960."]]]}

needs_data = pytest.mark.skipif(not (DATA_ROOT / "musique_dev").is_dir(), reason="../shared/data not present")


# ------------------------------------------------------------------ loaders: the four public sets
@needs_data
def test_hotpotqa_loads_100_questions_over_the_994_passage_corpus_joined_with_no_space():
    ds = load_named_set("hotpotqa")
    assert (len(ds.questions), len(ds.passages), ds.skipped) == (100, 994, {"no_passages": 0, "duplicate_id": 0})
    assert all(len(q["gold"]) == 2 and set(q["gold"]) <= set(ds.passages) for q in ds.questions)
    # gold passages are the questions' own paragraphs, found by title and text in the corpus file
    q = ds.questions[0]
    own = {t: text for t, text, gold in _question_passages(q, "") if gold}
    assert {k: ds.passages[k] for k in q["gold"]} == own
    assert "  " not in ds.passages[q["gold"][0]] and not ds.passages[q["gold"][0]].startswith(" ")


@needs_data
def test_musique_dedupes_the_two_samples_by_id_and_gold_count_is_the_hop_count():
    ds = load_named_set("musique")
    assert (len(ds.questions), len(ds.passages)) == (292, 4543)
    assert ds.skipped == {"no_passages": 0, "duplicate_id": 8}
    assert len({q["qid"] for q in ds.questions}) == 292
    for q in ds.questions:
        assert len(q["gold"]) == int(re.match(r"(\d)hop", q["qid"]).group(1)), q["qid"]
    assert Counter(len(q["gold"]) for q in ds.questions) == {2: 192, 3: 64, 4: 36}
    assert len({k for q in ds.questions for k in q["gold"]}) == 539  # the README's distinct gold paragraphs


@needs_data
def test_2wiki_skips_the_36_records_without_context_and_joins_sentences_with_a_space():
    ds = load_named_set("2wiki")
    assert (len(ds.questions), len(ds.passages)) == (164, 1294)
    assert ds.skipped == {"no_passages": 36, "duplicate_id": 0}
    assert Counter(len(q["gold"]) for q in ds.questions) == {2: 121, 4: 43}
    assert len({k for q in ds.questions for k in q["gold"]}) == 411
    title, sents = ds.questions[0]["context"][0]
    assert ds.passages[title] == " ".join(sents)


@needs_data
def test_quickstart_pools_its_three_files_into_one_set_of_30():
    ds = load_named_set("quickstart")
    assert len(ds.questions) == 30 and len({q["qid"] for q in ds.questions}) == 30
    assert Counter(q["source"] for q in ds.questions) == {"hotpot_example": 10, "musique_example": 10,
                                                         "wiki_example": 10}
    assert all(q["gold"] and set(q["gold"]) <= set(ds.passages) for q in ds.questions)
    # one title in two files with other text is two passages, each with its own title
    assert ds.titles["Dreamscaperers [2]"] == "Dreamscaperers"
    assert ds.docs["Dreamscaperers [2]"].startswith("Dreamscaperers\n")


# ------------------------------------------------------------------ loaders: formats
def test_load_pools_the_questions_contexts_or_reads_a_corpus_file(tmp_path):
    qpath = tmp_path / "q.json"
    qpath.write_text(json.dumps(QUESTIONS))
    ds = load_files([(qpath, "")])
    questions, passages = ds.questions, ds.passages
    assert passages["Blue River"] == "The Blue River is long. It flows through Ora."
    assert set(passages) == {"Zedland", "Blue River", "Moon"}
    assert questions[0]["gold"] == ["Blue River", "Zedland"] and questions[0]["qid"] == "q1"
    cpath = tmp_path / "c.json"
    cpath.write_text(json.dumps({"Zedland": ["Zedland is a country.", " Its capital is Ora."], "Sun": ["Hot."]}))
    passages = load_files([(qpath, "")], cpath).passages
    assert set(passages) == {"Zedland", "Sun"}


def test_load_files_keys_paragraphs_by_title_and_text_skips_contextless_and_repeated_ids(tmp_path):
    first, second = tmp_path / "a.jsonl", tmp_path / "b.json"
    first.write_text("\n".join(json.dumps(q) for q in [MUSIQUE, {"_id": "x", "question": "no context?"}]) + "\n")
    second.write_text(json.dumps([MUSIQUE, WIKI]))
    ds = load_files([(first, ""), (second, " ")])
    assert [q["qid"] for q in ds.questions] == ["2hop__1", "w1"]
    assert ds.skipped == {"no_passages": 1, "duplicate_id": 1}
    musique, wiki = ds.questions
    # two "Green Party" paragraphs with different text are two passages; only the supporting one is gold
    assert ds.passages["Green Party"] == "The Green Party was founded in 1990."
    assert ds.passages["Green Party [2]"] == "Bo Chen leads the Green Party."
    assert musique["gold"] == ["Ann Lee", "Green Party [2]"]
    assert ds.docs["Green Party [2]"] == "Green Party\nBo Chen leads the Green Party."
    assert ds.passages["Ann"] == "Ann was born in 1950. She sings." and wiki["gold"] == ["Ann", "Bo"]  # " " join


# ------------------------------------------------------------------ recall on decoded text
def _csv_context(rows: list[list[str]]) -> str:
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerows([["id", "doc_id", "content"], *rows])
    return "-----Sources-----\n```csv\n" + buf.getvalue() + "```"


def test_recall_finds_a_passage_with_quotes_and_commas_inside_a_csv_cell_but_not_a_partial_one():
    passage = 'Ann said "yes, of course", then left; "Ora", the capital, cheered.'
    other = "Bo Chen leads the Green Party, founded in 1990."
    passages = {"A": passage, "B": other}
    context = _csv_context([["c1", "d1", f"Ann\n{passage}"]])
    assert 'c1,d1,"Ann\nAnn said ""yes, of course"", then left; ""Ora"", the capital, cheered."' in context
    assert recall(context, ["A"], passages) == 1.0
    assert recall(context, ["A", "B"], passages) == 0.5
    half = _csv_context([["c1", "d1", 'Ann said "yes, of course", then left;']])
    assert recall(half, ["A"], passages) == 0.0  # only its first half is there
    cut = _csv_context([["c1", "d1", passage[:-10]]])
    assert recall(cut, ["A"], passages) == 0.0  # truncated by the budget: not the passage


def test_recall_counts_whole_passages_of_whole_words_whitespace_normalised():
    passages = {"A": "alpha  beta\ngamma.", "B": "delta epsilon.", "C": "is a country"}
    assert recall("x alpha beta gamma. y", ["A", "B"], passages) == 0.5
    assert recall("alpha beta gamma. delta epsilon.", ["A", "B"], passages) == 1.0
    assert recall("alpha beta", ["A"], passages) == 0.0
    assert recall("this a country", ["C"], passages) == 0.0  # "is" is not the end of "this"
    assert recall("anything", [], passages) == 0.0


# ------------------------------------------------------------------ chunk ids -> passages
def test_chunk_map_matches_exact_text_first_then_normalised_then_a_split_passage():
    docs = {"A": 'A\n"Alpha" is first.', "A [2]": "A\nAlpha is first.", "B": "B\nBeta one. Beta two. Beta three."}
    chunks = {"c1": 'A\n"Alpha" is first.', "c2": "A\nAlpha is first.\n", "c3": "Beta two. Beta three.",
              "c4": "Gamma.", "c5": "a alpha IS first"}
    assert chunk_passage_map(chunks, docs) == {"c1": "A", "c2": "A [2]", "c3": "B", "c5": "A"}


# ------------------------------------------------------------------ the per-question record
def _result(mode: str, allowed: int, used: int, chunks: list[str], candidates: list[str] | None = None,
            context: str = "", sections: tuple[str, ...] = ("entities", "sources"), context_ms: float | None = None):
    details = {} if candidates is None else {"candidates": candidates}
    if context_ms is not None:
        details["context_ms"] = context_ms
    return {"mode": mode, "context": context, "details": details, "sources": {"chunks": chunks},
            "budget": {"total_allowed": allowed, "total_tokens": used,
                       "sections": [{"name": n, "candidates": 9, "kept": 2, "tokens_used": used // len(sections),
                                     "tokens_allowed": allowed} for n in sections]}}


PASSAGES = {"Ann Lee": "Ann Lee is a member of the Green Party.", "Green Party [2]": "Bo Chen leads the Green Party.",
            "Moon": "The Moon orbits the Earth."}
CHUNKS = {"c-ann": "Ann Lee", "c-green": "Green Party [2]", "c-moon": "Moon"}
Q = {"qid": "2hop__1", "gold": ["Ann Lee", "Green Party [2]"]}


def test_question_record_places_each_gold_passage_in_the_candidates_kept_chunks_and_context():
    context = "id,doc_id,content\nc-moon,d,The Moon orbits the Earth.\nc-ann,d,Ann Lee is a member of the Green"
    result = _result("hybrid", 3500, 3000, ["c-moon", "c-ann"], ["c-moon", "c-x", "c-ann", "c-green", "c-ann"],
                     context, context_ms=12.5)
    ranked, kept = graphfleet_keys(result, CHUNKS)
    assert ranked == ["Moon", None, "Ann Lee", "Green Party [2]", "Ann Lee"] and kept == {"Moon", "Ann Lee"}
    head = {"set": "musique", "llm": True, "system": "graphfleet", "mode": "hybrid"}
    rec = question_record(head, Q, context, PASSAGES, result=result, ranked=ranked, kept=kept, context_tokens=31,
                          seconds=0.123456)
    assert rec["gold"] == [
        # kept, but its text was cut short in the context: not counted as retrieved
        {"key": "Ann Lee", "candidate_rank": 3, "kept": True, "in_context": False},
        {"key": "Green Party [2]", "candidate_rank": 4, "kept": False, "in_context": False}]
    assert rec["section_tokens"] == {"entities": 1500, "sources": 1500}
    assert (rec["allowance"], rec["total_tokens"], rec["context_tokens"]) == (3500, 3000, 31)
    assert (rec["recall"], rec["candidates"], rec["carries_passages"]) == (0.0, 5, True)
    assert (rec["seconds"], rec["context_ms"], rec["mode"], rec["qid"]) == (0.1235, 12.5, "hybrid", "2hop__1")

    full = context + " Party.\nc-green,d,Bo Chen leads the Green Party."
    rec = question_record(head, Q, full, PASSAGES, result=_result("naive", 3600, 10, ["c-green"], context=full),
                          ranked=None, kept={"Green Party [2]"}, context_tokens=40)
    assert [(g["candidate_rank"], g["kept"], g["in_context"]) for g in rec["gold"]] == [
        (None, False, True), (None, True, True)]  # no candidates reported: no ranks
    assert rec["recall"] == 1.0 and rec["candidates"] is None and rec["context_ms"] is None


# ------------------------------------------------------------------ BM25: same allowance, packing
def test_bm25_gets_the_largest_allowance_of_the_passage_carrying_modes_per_question():
    head = {"set": "s", "llm": True, "system": "graphfleet"}
    records = []
    for mode, allowed, sections in (("local", 3400, ("reports", "entities", "sources")), ("naive", 3700, ("sources",)),
                                    ("global", 3900, ("reports",)), ("hybrid", 3650, ("entities", "sources"))):
        for qid, extra in (("q1", 0), ("q2", 5)):
            res = _result(mode, allowed + extra, 100, [], sections=sections)
            records.append(question_record({**head, "mode": mode}, {"qid": qid, "gold": []}, "", {}, result=res))
    only_global = question_record({**head, "mode": "global"}, {"qid": "q3", "gold": []}, "", {},
                                  result=_result("global", 3900, 100, [], sections=("reports",)))
    # global's context is reports, not passages: its larger allowance is not BM25's
    assert bm25_allowances([*records, only_global], 4000) == {"q1": (3700, "naive"), "q2": (3705, "naive"),
                                                              "q3": (4000, None)}
    # a mode reporting candidates carries passages whatever its sections are called
    graph = question_record({**head, "mode": "graph"}, {"qid": "q1", "gold": []}, "", {},
                            result=_result("graph", 3800, 1, [], [], sections=("passages",)))
    assert bm25_allowances([*records, graph], 4000)["q1"] == (3800, "graph")


def test_bm25_packs_whole_passages_best_first_within_each_questions_allowance():
    passages = {f"P{i}": f"filler text number {i} " * 20 for i in range(30)}
    passages["Target"] = "The Blue River flows through Ora, the capital of Zedland."
    ds = Dataset("t", [{"qid": "a", "question": "river through the capital of Zedland", "gold": ["Target"]},
                       {"qid": "b", "question": "filler number 7 river", "gold": ["P7"]}],
                 passages, {k: k for k in passages})
    bm25 = Bm25(ds.docs, top_k=300)
    rankings = {q["qid"]: Ranking([key for key, _ in bm25.scored(q["question"])], 0.0) for q in ds.questions}
    assert rankings["a"].keys == ["Target"]  # only passages with a positive score
    assert rankings["b"].keys[0] == "P7" and len(rankings["b"].keys) == 31
    head = {"set": "t", "llm": False, "system": "bm25", "mode": "bm25"}
    recs = bm25.records(ds, head, rankings, {"a": (300, "naive"), "b": (150, "local")}, 4000)
    for rec, allowance in zip(recs, (300, 150), strict=True):
        assert rec["allowance"] == allowance and rec["total_tokens"] == rec["context_tokens"] <= allowance
        assert rec["gold"][0]["candidate_rank"] == 1 and rec["gold"][0]["kept"] and rec["recall"] == 1.0
    assert [r["allowance_from"] for r in recs] == ["naive", "local"]
    context, kept = bm25.pack(rankings["b"].keys, 300)
    assert context.startswith("P7\nfiller text number 7") and count_tokens(context, BUDGET_MODEL) <= 300
    assert 1 < len(kept) < len(bm25.pack(rankings["b"].keys, 4000)[1]) == 31  # the allowance limits it, not top_k
    full = bm25.records(ds, {**head, "mode": "bm25_full"}, rankings, None, 4000)
    assert [r["allowance"] for r in full] == [4000, 4000] and full[0]["allowance_from"] is None


# ------------------------------------------------------------------ summaries
def _rec(mode: str, qid: str, recall_: float, tokens: int, allowance: int | None, seconds: float | None = 0.1,
         ms: float | None = None, gold: list[dict] | None = None) -> dict:
    return {"mode": mode, "qid": qid, "recall": recall_, "context_tokens": tokens, "total_tokens": tokens,
            "allowance": allowance, "seconds": seconds, "context_ms": ms, "candidates": None,
            "gold": gold or [{"key": "k", "candidate_rank": None, "kept": None, "in_context": recall_ > 0}]}


def test_mode_stats_and_set_summary():
    local = [_rec("local", "a", 1.0, 3000, 3500, 0.2, 10.0), _rec("local", "b", 0.5, 4100, 3600, 0.4, 30.0),
             _rec("local", "c", 0.0, 1000, 3400, 0.3, None)]
    stats = mode_stats(local, 4000)
    assert stats["recall"] == 0.5
    assert (stats["context_tokens_median"], stats["over_budget"], stats["allowance_median"]) == (3000, 1, 3500)
    assert stats["allowance_used_median"] == round(3000 / 3500, 4)
    assert (stats["seconds_p50"], stats["context_ms_p50"]) == (0.3, 20.0)
    summary = set_summary({"set": "s", "llm": True, "system": "graphfleet"}, {"local": local}, 4000, 99,
                          bm25=[_rec("bm25", q, 1.0, 3400, 3600, None) for q in "abc"], bm25_full=[])
    assert summary["bench"] == "retrieval_set" and summary["questions"] == 3 and summary["passages"] == 99
    assert summary["modes"]["local"] == stats and summary["bm25"]["recall"] == 1.0
    assert summary["bm25"]["allowance_median"] == 3600 and summary["bm25"]["seconds_p50"] is None
    assert summary["bm25_full"]["recall"] is None  # no questions: no figure rather than a failure


# ------------------------------------------------------------------ options
def test_options_default_to_all_four_sets_every_mode_and_keep_no_llm(tmp_path):
    args = parse_args(["--modes", "naive", "--out", str(tmp_path / "r.jsonl")])
    assert args.sets == ["hotpotqa", "musique", "2wiki", "quickstart"] and args.llm == "sim"
    assert args.questions_out == tmp_path / "r.questions.jsonl" and args.bm25_top_k == 300
    assert parse_args(["--modes", "naive", "--llm", "none"]).llm == "none"
    assert parse_args(["--modes", "naive", "--llm", "both"]).llm == "both"
    q = tmp_path / "set.jsonl"
    q.write_text(json.dumps(WIKI) + "\n")
    args = parse_args(["--modes", "naive", "--questions", str(q), "--join", " "])
    assert args.sets == [] and args.corpus is None and args.questions_out is None
    assert DEFAULT_MODES == ["local", "global", "naive", "hybrid", "causal", "graph"]
    assert parse_args([]).modes == DEFAULT_MODES
    with pytest.raises(SystemExit):
        parse_args(["--modes", "naive", "warp"])  # refused before any ingestion


def test_variants_parse_to_query_param_overrides_and_reject_bad_fields():
    assert parse_variant("fixed-caps:hybrid:max_entity_tokens=6000,max_relation_tokens=8000") == (
        "fixed-caps", "hybrid", {"max_entity_tokens": 6000, "max_relation_tokens": 8000})
    assert parse_variant("plain:naive") == ("plain", "naive", {})
    for bad in ("nomode", "x:local:no_such_field=1", "x:local:top_k=-3", "x:warp", "x:local:top_k"):
        with pytest.raises((argparse.ArgumentTypeError, ValueError)):
            parse_variant(bad)


def test_in_flight_seconds_are_the_union_of_the_calls():
    from types import SimpleNamespace as Rec

    from bench.suites.retrieval import in_flight_s

    # calls [0, 1], [0.5, 1.5], [3, 4]: in flight 2.5 s; a call inside another adds nothing
    calls = [Rec(ts=1.0, latency_s=1.0), Rec(ts=1.5, latency_s=1.0), Rec(ts=4.0, latency_s=1.0)]
    assert in_flight_s(calls) == pytest.approx(2.5) and in_flight_s([]) == 0.0
    assert in_flight_s([Rec(ts=1.0, latency_s=1.0), Rec(ts=0.4, latency_s=0.2)]) == pytest.approx(1.0)
