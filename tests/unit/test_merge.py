"""Merging fragments and map-reduce summaries."""

from __future__ import annotations

from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from shared.config import MergeSettings
from shared.domain.merge import (
    GRAPH_FIELD_SEP,
    build_summary_messages,
    drop_sources,
    majority_type,
    merge_entity,
    merge_relation,
    needs_summary,
    relation_key,
    summarize_description,
    summary_part_trigger,
)
from shared.domain.models import EntityFragment, RelationFragment
from shared.domain.prompts.summarize_descriptions import MARKER
from shared.domain.tokens import count_tokens, tokens_over

TYPES = st.sampled_from(["person", "geo", "unknown", "organization", ""])
TEXT = st.sampled_from(["", "a tall man", "a banker", "lives in London", "x<SEP>y"])
CHUNKS = st.sampled_from(["c1", "c2", "c3", "c4"])

entity_fragments = st.lists(
    st.builds(
        EntityFragment,
        name=st.just("A"),
        type=TYPES,
        description=TEXT,
        source_id=CHUNKS,
        doc_id=st.sampled_from(["", "d1", "d2"]),
    ),
    max_size=8,
)
relation_fragments = st.lists(
    st.builds(
        RelationFragment,
        src=st.sampled_from(["A", "B"]),
        tgt=st.sampled_from(["A", "B"]),
        description=TEXT,
        keywords=st.sampled_from(["", "work", "work, family", "family, money"]),
        weight=st.floats(0.1, 10.0, allow_nan=False),
        source_id=CHUNKS,
    ),
    max_size=8,
)


@settings(max_examples=150, deadline=None)
@given(entity_fragments, st.randoms(use_true_random=False))
def test_merge_entity_is_commutative_and_idempotent(frags, rnd):
    merged = merge_entity("A", frags)
    shuffled = list(frags)
    rnd.shuffle(shuffled)
    assert merge_entity("A", shuffled) == merged
    assert merge_entity("A", frags + frags) == merged
    assert merged.source_ids == sorted({f.source_id for f in frags})
    parts = merged.description.split(GRAPH_FIELD_SEP) if merged.description else []
    assert len(parts) == len(set(parts)) and "" not in parts


@settings(max_examples=150, deadline=None)
@given(relation_fragments, st.randoms(use_true_random=False))
def test_merge_relation_is_commutative_and_symmetric(frags, rnd):
    merged = merge_relation("A", "B", frags)
    shuffled = list(frags)
    rnd.shuffle(shuffled)
    assert merge_relation("B", "A", shuffled) == merged
    assert merge_relation("A", "B", frags + frags) == merged
    assert (merged.src, merged.tgt) == ("A", "B")


def test_entity_merge_details():
    frags = [
        EntityFragment(name="A", type="unknown", description="", source_id="c9"),
        EntityFragment(name="A", type="unknown", description="zeta", source_id="c1", doc_id="d2"),
        EntityFragment(name="A", type="geo", description="beta", source_id="c2", doc_id="d1"),
        EntityFragment(name="A", type="person", description="alpha<SEP>zeta", source_id="c3", doc_id="d1"),
    ]
    e = merge_entity("A", frags)
    assert e.type == "geo"  # tie geo/person -> alphabetical; unknown loses even with 2 votes
    assert e.description == "zeta<SEP>beta<SEP>alpha"  # ordered by source chunk, then text
    assert e.source_ids == ["c1", "c2", "c3", "c9"] and e.doc_ids == ["d1", "d2"]
    assert majority_type(["unknown", "unknown"]) == "unknown"
    assert majority_type(["person", "geo", "person"]) == "person"


def test_relation_key_symmetry_and_merge():
    assert relation_key("B", "A") == relation_key("A", "B") == ("A", "B")
    frags = [
        RelationFragment(src="B", tgt="A", description="d2", keywords="x, y", weight=2, source_id="c2"),
        RelationFragment(src="A", tgt="B", description="d1", keywords="y,z", weight=3.5, source_id="c1"),
    ]
    r = merge_relation("B", "A", frags)
    assert (r.src, r.tgt, r.weight, r.keywords) == ("A", "B", 5.5, "x, y, z")
    assert r.description == "d1<SEP>d2" and r.source_ids == ["c1", "c2"]


def test_drop_sources():
    frags = [EntityFragment(name="A", source_id=c) for c in ("c1", "c2", "c3")]
    assert [f.source_id for f in drop_sources(frags, ["c2", "zz"])] == ["c1", "c3"]
    assert drop_sources(frags, []) == frags


def test_needs_summary_thresholds():
    s = MergeSettings(force_llm_summary_on_merge=3, summary_trigger_tokens=10)
    over = lambda text, limit: len(text) > limit  # noqa: E731 - a "token" per character keeps the arithmetic obvious
    assert not needs_summary(["ab", "cd"], s, over)
    assert needs_summary(["a", "b", "c"], s, over)  # fragment count
    assert not needs_summary(["a" * 10], s, over)
    assert needs_summary(["a" * 6, "b" * 6], s, over)  # 6 + 5 + 6 chars > 10
    assert not needs_summary(["x"] * 7, MergeSettings(), tokens_over)
    assert needs_summary(["x"] * 8, MergeSettings(), tokens_over)
    long = ["a long description of the entity, " * 120] * 2  # 1,440 words: over the 1,200-token trigger
    assert needs_summary(long, MergeSettings(), tokens_over)


def test_rows_gaining_parts_in_step_cross_the_summary_trigger_at_different_counts():
    """Copies or revisions of the same documents give many rows one part each per batch: each row's own trigger
    (8 parts moved by up to 2 either way) spreads their summaries over several batches, the same for the same row
    and parts, and drawn afresh from each summary."""
    s = MergeSettings()
    crossing = {}
    for i in range(2000):
        parts = [f"relation {i} as first described"]
        while not needs_summary(parts, s, tokens_over, key=f"A{i} -> B{i}"):
            parts.append(f"a further mention {len(parts)}")
        crossing[i] = len(parts)
    counts = Counter(crossing.values())
    assert set(counts) == {6, 7, 8, 9, 10} and min(counts.values()) > 300  # every count, about evenly
    assert 7.8 < sum(crossing.values()) / len(crossing) < 8.2  # on average the setting
    again = ["relation 5 as first described"] + [f"a further mention {n}" for n in range(1, crossing[5])]
    assert needs_summary(again, s, tokens_over, key="A5 -> B5")  # a retried merge decides alike
    after = {summary_part_trigger(s, f"A{i} -> B{i}", [f"summary {i}"]) for i in range(50)}
    assert len(after) > 1  # the next crossing is drawn from the summary
    assert summary_part_trigger(s, None, ["x"]) == 8  # no key: exactly the setting
    assert summary_part_trigger(MergeSettings(force_llm_summary_on_merge=2), "k", ["x"]) == 2  # too few to spread


def test_build_summary_messages():
    (msg,) = build_summary_messages("SCROOGE", ["a miser", "a partner of Marley"], 300)
    assert msg["role"] == "user" and MARKER in msg["content"]
    assert "Entity: SCROOGE" in msg["content"] and "Keep it under 300 tokens" in msg["content"]
    assert "- a miser\n- a partner of Marley" in msg["content"]


class CountingSummarizer:
    def __init__(self):
        self.calls: list[list[str]] = []

    def __call__(self, name: str, group: list[str]) -> str:
        self.calls.append(list(group))
        return f"summary {len(self.calls)} of {name}"


def test_summary_single_call_when_it_fits():
    fake = CountingSummarizer()
    out = summarize_description("A", ["one", " ", "two"], fake, MergeSettings())
    assert out == "summary 1 of A" and fake.calls == [["one", "two"]]
    assert summarize_description("A", ["", "  "], fake, MergeSettings()) == ""


def test_summary_map_reduce_path():
    s = MergeSettings(summary_context_size=100)
    fragments = [(f"fragment number {i} " + "word " * 20).strip() for i in range(12)]  # ~24 tokens
    fake = CountingSummarizer()
    out = summarize_description("A", fragments, fake, s)
    per_group = 100 // (count_tokens(fragments[0]) + 1)  # 4 with cl100k
    groups = -(-12 // per_group)
    assert groups >= 2
    assert len(fake.calls) == groups + 1  # map over groups, then one reduce
    assert out == f"summary {groups + 1} of A"
    assert [f for group in fake.calls[:-1] for f in group] == fragments  # every fragment used once
    for group in fake.calls:
        assert sum(count_tokens(f) + 1 for f in group) <= 100
    assert fake.calls[-1] == [f"summary {i} of A" for i in range(1, groups + 1)]


def test_summary_terminates_with_echoing_summarizer_and_huge_fragments():
    s = MergeSettings(summary_context_size=64)
    calls = []

    def echo(name, group):
        calls.append(group)
        return " ".join(group)  # never shrinks anything

    out = summarize_description("A", ["lorem ipsum " * 200] * 5, echo, s)
    assert out and len(calls) < 20
    assert all(sum(count_tokens(f) + 1 for f in g) <= 64 for g in calls)
