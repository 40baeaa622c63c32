"""The retrieval-quality harness's pure parts: loading a HotpotQA-style set, the recall metric, and the
BM25 baseline's budget packing (bench/retrieval_eval.py)."""

from __future__ import annotations

import argparse
import json

import pytest

from bench.retrieval_eval import BUDGET_MODEL, bm25_context, gold_titles, load_set, parse_variant, recall
from shared.retrieval.bm25 import BM25Index
from shared.tokens import count_tokens

QUESTIONS = [
    {"_id": "q1", "question": "Which river flows through the capital of Zedland?", "answer": "Blue",
     "supporting_facts": [["Zedland", 0], ["Blue River", 1], ["Zedland", 1]],
     "context": [["Zedland", ["Zedland is a country.", " Its capital is Ora."]],
                 ["Blue River", ["The Blue River is long.", " It flows through Ora."]],
                 ["Moon", ["The Moon orbits the Earth."]]]},
]


def test_load_pools_the_questions_contexts_or_reads_a_corpus_file(tmp_path):
    qpath = tmp_path / "q.json"
    qpath.write_text(json.dumps(QUESTIONS))
    questions, passages = load_set(qpath, None)
    assert passages["Blue River"] == "The Blue River is long. It flows through Ora."
    assert set(passages) == {"Zedland", "Blue River", "Moon"}
    cpath = tmp_path / "c.json"
    cpath.write_text(json.dumps({"Zedland": ["Zedland is a country.", " Its capital is Ora."], "Sun": ["Hot."]}))
    _, passages = load_set(qpath, cpath)
    assert set(passages) == {"Zedland", "Sun"}
    assert gold_titles(questions[0]) == ["Blue River", "Zedland"]


MUSIQUE = {"id": "2hop__1", "question": "Who leads the party of Ann Lee?", "answer": "Bo Chen", "paragraphs": [
    {"idx": 0, "title": "Ann Lee", "paragraph_text": "Ann Lee is a member of the Green Party.", "is_supporting": True},
    {"idx": 1, "title": "Green Party", "paragraph_text": "The Green Party was founded in 1990.",
     "is_supporting": False},
    {"idx": 2, "title": "Green Party", "paragraph_text": "Bo Chen leads the Green Party.", "is_supporting": True},
    {"idx": 3, "title": "Moon", "paragraph_text": "The Moon orbits the Earth.", "is_supporting": False}]}


def test_load_reads_json_lines_and_musique_paragraphs_marked_per_paragraph(tmp_path):
    path = tmp_path / "mixed.jsonl"
    path.write_text("\n".join(json.dumps(q) for q in [MUSIQUE, *QUESTIONS]) + "\n")
    questions, passages = load_set(path, None)
    musique, hotpot = questions
    # two "Green Party" paragraphs with different text are two passages; only the supporting one is gold
    assert passages["Green Party"] == "The Green Party was founded in 1990."
    assert passages["Green Party [2]"] == "Bo Chen leads the Green Party."
    assert gold_titles(musique) == ["Ann Lee", "Green Party [2]"]
    assert recall("Bo Chen leads the Green Party. Ann Lee is a member of the Green Party.", gold_titles(musique),
                  passages) == 1.0
    assert recall("The Green Party was founded in 1990.", gold_titles(musique), passages) == 0.0
    assert gold_titles(hotpot) == ["Blue River", "Zedland"] and "Zedland" in passages


def test_recall_counts_whole_passages_only_whitespace_normalised():
    passages = {"A": "alpha  beta\ngamma.", "B": "delta epsilon."}
    assert recall("x alpha beta gamma. y", ["A", "B"], passages) == 0.5
    assert recall("alpha beta gamma. delta epsilon.", ["A", "B"], passages) == 1.0
    assert recall("alpha beta", ["A"], passages) == 0.0  # a fragment is not the passage
    quoted = {"Q": 'He said "yes", then left.'}
    assert recall('12,"He said ""yes"", then left.",3', ["Q"], quoted) == 1.0  # a CSV cell of the context
    assert recall("anything", [], passages) == 0.0


def test_bm25_baseline_ranks_and_never_exceeds_the_budget():
    passages = {f"P{i}": f"filler text number {i} " * 20 for i in range(30)}
    passages["Target"] = "The Blue River flows through Ora, the capital of Zedland."
    index = BM25Index.build((t, f"{t}\n{p}") for t, p in passages.items())
    ctx, used = bm25_context(index, passages, "river through the capital of Zedland", 300)
    assert ctx.startswith("Target\n")
    assert used <= 300 and count_tokens(ctx, BUDGET_MODEL) <= 300
    assert recall(ctx, ["Target"], passages) == 1.0


def test_variants_parse_to_query_param_overrides_and_reject_bad_fields():
    assert parse_variant("fixed-caps:hybrid:max_entity_tokens=6000,max_relation_tokens=8000") == (
        "fixed-caps", "hybrid", {"max_entity_tokens": 6000, "max_relation_tokens": 8000})
    assert parse_variant("no-rest:local:local_sources_take_remainder=false,text_order=shortest_first") == (
        "no-rest", "local", {"local_sources_take_remainder": False, "text_order": "shortest_first"})
    assert parse_variant("plain:naive") == ("plain", "naive", {})
    for bad in ("nomode", "x:local:no_such_field=1", "x:local:top_k=-3", "x:warp", "x:local:top_k"):
        with pytest.raises((argparse.ArgumentTypeError, ValueError)):
            parse_variant(bad)
