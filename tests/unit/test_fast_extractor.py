"""Rule-based extraction without an LLM, and corpus-level pruning."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from shared.domain.chunking import chunk_by_tokens
from shared.domain.extraction.fast_extractor import extract_chunk_fast, pair_span, prune_graph, split_sentences
from shared.domain.extraction.lexicon import STOPWORDS
from shared.domain.merge import merge_entity, merge_relation, relation_key
from shared.domain.models import Entity, Relation

SAMPLE = Path(__file__).resolve().parents[2] / "graphfleet_cli" / "sample" / "christmas_carol.txt"


@pytest.fixture(scope="module")
def carol():
    chunks = chunk_by_tokens(SAMPLE.read_text(encoding="utf-8"), "doc", 1200, 100)
    return chunks, [extract_chunk_fast(c.text, c.id, "doc") for c in chunks]


def test_small_text():
    text = (
        "Mr. Fezziwig lived in London with Dick Wilkins. The dusty warehouse stood near the river. "
        "Dick Wilkins swept the dusty warehouse. Fezziwig laughed at Dick Wilkins in London. "
        "The Bank of England was closed."
    )
    r = extract_chunk_fast(text, "c1", "d1")
    types = {e.name: e.type for e in r.entities}
    assert types["MR. FEZZIWIG"] == "person"
    assert types["DICK WILKINS"] == "person"
    assert types["LONDON"] == "geo"
    assert types["BANK OF ENGLAND"] == "organization"
    assert types["DUSTY WAREHOUSE"] == "concept" and "WAREHOUSE" not in types
    assert "THE" not in types and "MR" not in types
    dick = next(e for e in r.entities if e.name == "DICK WILKINS")
    assert dick.description.startswith("Mr. Fezziwig lived in London with Dick Wilkins.")
    assert dick.source_id == "c1" and dick.doc_id == "d1"
    rel = {relation_key(x.src, x.tgt): x for x in r.relations}
    both = rel[relation_key("DICK WILKINS", "LONDON")]
    assert both.weight == 2.0  # co-occur in two sentences
    assert both.description.startswith("Mr. Fezziwig lived in London")
    names = {e.name for e in r.entities}
    assert all(x.src in names and x.tgt in names and x.src != x.tgt for x in r.relations)


def test_sentence_start_words_need_confirmation():
    text = "Darkness is cheap. He liked the darkness. Scrooge went home. Then Scrooge slept. Yes."
    names = {e.name for e in extract_chunk_fast(text, "c", "d").entities}
    assert "SCROOGE" in names
    assert not names & {"DARKNESS", "YES", "HE", "THEN"}


def test_split_sentences_keeps_titles_and_initials():
    s = split_sentences("Mr. Scrooge met J. B. Lippincott. It rained!\n\nNew paragraph")
    assert s == ["Mr. Scrooge met J. B. Lippincott.", "It rained!", "New paragraph"]


def test_christmas_carol(carol):
    chunks, results = carol
    counts = Counter(e.name for r in results for e in r.entities)
    for expected in ("SCROOGE", "MARLEY", "BOB CRATCHIT", "LONDON", "TINY TIM", "FEZZIWIG"):
        assert expected in counts, expected
    assert counts["SCROOGE"] >= 20
    for r in results:
        assert len(r.entities) <= 30 and len(r.relations) <= 60
        for e in r.entities:
            assert e.name.lower() not in STOPWORDS
            assert len(e.name) > 1 and not e.name.replace(" ", "").isdigit()
            assert e.description
    types = Counter(e.type for r in results for e in r.entities if e.name == "SCROOGE")
    assert types.most_common(1)[0][0] == "person"


def test_prune_graph_on_corpus(carol):
    _, results = carol
    by_entity: dict[str, list] = {}
    by_relation: dict[tuple[str, str], list] = {}
    for r in results:
        for e in r.entities:
            by_entity.setdefault(e.name, []).append(e)
        for x in r.relations:
            by_relation.setdefault(relation_key(x.src, x.tgt), []).append(x)
    entities = {n: merge_entity(n, f) for n, f in by_entity.items()}
    relations = {k: merge_relation(*k, f) for k, f in by_relation.items()}
    kept, kept_rel = prune_graph(entities, relations, min_mentions=2)
    assert "SCROOGE" in kept and "BOB CRATCHIT" in kept
    assert len(kept) < len(entities)
    assert all(a in kept and b in kept for a, b in kept_rel)
    for name, ent in kept.items():
        strong = any(name in k and r.weight >= 3 for k, r in relations.items())
        assert len(ent.source_ids) >= 2 or strong


def test_prune_graph_rule():
    ents = {
        "A": Entity(name="A", source_ids=["c1", "c2"]),
        "B": Entity(name="B", source_ids=["c1"]),
        "C": Entity(name="C", source_ids=["c3"]),
        "D": Entity(name="D", source_ids=["c3", "c3"]),
    }
    rels = {
        ("A", "B"): Relation(src="A", tgt="B", weight=3.0),
        ("A", "C"): Relation(src="A", tgt="C", weight=1.0),
        ("C", "D"): Relation(src="C", tgt="D", weight=2.0),
    }
    kept, kept_rel = prune_graph(ents, rels, min_mentions=2, strong_edge_weight=3.0)
    assert set(kept) == {"A", "B"}  # B survives through its strong edge; D's chunks are not distinct
    assert set(kept_rel) == {("A", "B")}
    assert len(ents) == 4 and len(rels) == 3  # inputs untouched


def test_a_title_line_is_not_run_into_the_first_sentence_and_counts_as_a_name():
    text = ("Samuel Fuller\nSamuel Michael Fuller (August 12, 1912 - October 30, 1997) was an American "
            "screenwriter and film director. Fuller wrote his first screenplay in 1936.")
    names = [e.name for e in extract_chunk_fast(text, "c1", "d1").entities]
    assert "SAMUEL FULLER" in names and not any(n.startswith("SAMUEL FULLER SAMUEL") for n in names)
    wrapped = ("Marley was dead, to begin with. There is no doubt whatever about that.\n"
               "The register of his burial was signed by the clergyman, the clerk, the undertaker.")
    assert len(split_sentences(wrapped)) == 3  # hard-wrapped prose is not cut at its line breaks


def test_a_relation_keeps_the_words_between_its_names_not_the_whole_sentence_again():
    sentence = ("On a cold evening in the old city of Lisbon, Maria Costa met Joao Silva at the harbour, where "
                "the ships of the Royal Navy and the merchants of the Hanseatic League waited for the spring tide.")
    result = extract_chunk_fast(sentence, "c1", "doc")
    rels = {relation_key(r.src, r.tgt): r for r in result.relations}
    pair = rels[relation_key("MARIA COSTA", "JOAO SILVA")]
    assert pair.description == "…old city of Lisbon, Maria Costa met Joao Silva at the harbour, where…"
    far = rels[relation_key("LISBON", "HANSEATIC LEAGUE")]  # the span between them, whatever its length
    assert far.description.startswith("…the old city of Lisbon,") and "Hanseatic League" in far.description
    assert all(len(r.description) < len(sentence) for r in result.relations)
    assert pair_span("Scrooge met Marley.", "SCROOGE", "NOBODY") == "Scrooge met Marley."  # a name not as written
