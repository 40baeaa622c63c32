"""Graph sections made as the allocator reads them (``shared.domain.query.lazy``): the same context, cut and evidence
as sections made whole up front, and the candidates the budget never reaches are never rendered or counted."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from shared.domain.models import Entity, Relation
from shared.domain.query.budget import Section, allocate
from shared.domain.query.context_local import entity_section, relation_section
from shared.domain.query.lazy import BatchedCounts, LazyList
from shared.domain.tokens import count_tokens, get_encoding

MODEL = "gpt-4o-mini"
ENC = get_encoding(MODEL).name
WORDS = st.sampled_from(["Scrooge", "clerk,", "a \"humbug\"", "Marley's", "ghost.", "Tiny", "Tim", "é—…", "\n"])


def test_a_lazy_list_makes_each_item_once_when_first_read():
    made: list[int] = []
    items = LazyList(5, lambda i: made.append(i) or i * 10)
    assert len(items) == 5 and items.made() == 0
    assert items[3] == 30 and items[-1] == 40 and items[3] == 30
    assert made == [3, 4]
    assert items[1:3] == [10, 20] and made == [3, 4, 1, 2]
    items[1] = 99
    assert items[1] == 99 and list(items) == [0, 99, 20, 30, 40] and items.made() == 5
    with pytest.raises(IndexError):
        items[5]


def test_batched_counts_count_in_growing_batches_only_as_far_as_read():
    calls: list[tuple[int, int]] = []

    def count(start: int, stop: int) -> list[int]:
        calls.append((start, stop))
        return list(range(start, stop))

    counts = BatchedCounts(100, count)
    seen = []
    for i, n in enumerate(counts):
        seen.append(n)
        if i == 20:
            break
    assert seen == list(range(21)) and calls == [(0, 16), (16, 48)] and counts.counted() == 48
    assert counts[99] == 99 and counts[-1] == 99 and calls[-1][1] == 100 and counts[10:12] == [10, 11]
    assert list(counts) == list(range(100))


def _entities(descs: list[str]) -> list[Entity]:
    return [Entity(name=f"N{i}", type="person", description=d, degree=i % 3, doc_ids=["d"], source_ids=[f"c{i}"],
                   text_tokens={ENC: count_tokens(d, MODEL)} if i % 4 else {}) for i, d in enumerate(descs)]


def _relations(descs: list[str]) -> list[Relation]:
    return [Relation(src=f"N{i}", tgt=f"N{i + 1}", description=d, weight=float(i % 5), rank=i, source_ids=[f"c{i}"],
                     text_tokens={ENC: count_tokens(d, MODEL)} if i % 3 else {}) for i, d in enumerate(descs)]


def _eager(sec: Section) -> Section:
    """The same section with every row rendered and counted up front (as the builders made it before)."""
    return Section(sec.name, list(sec.rows), sec.title, sec.header, sec.cap, shrink=sec.shrink, fill=sec.fill,
                   min_partial=sec.min_partial, row_tokens=None if sec.row_tokens is None else list(sec.row_tokens))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.lists(WORDS, min_size=1, max_size=60).map(" ".join), min_size=1, max_size=40),
       st.integers(min_value=0, max_value=3000), st.booleans())
def test_lazy_graph_sections_give_the_context_and_evidence_of_sections_made_up_front(descs, total, stop_on_cut):
    def build():
        ents, ent_ev = entity_section(_entities(descs), total // 3, {"N0": 0.5}, MODEL)
        rels, rel_ev = relation_section(_relations(descs), None, MODEL)
        return [ents, rels], {"entities": ent_ev, "relationships": rel_ev}

    lazy_sections, lazy_ev = build()
    eager_sections, eager_ev = build()
    lazy = allocate(lazy_sections, total, MODEL, min_partial=24, stop_on_cut=stop_on_cut)
    eager = allocate([_eager(s) for s in eager_sections], total, MODEL, min_partial=24, stop_on_cut=stop_on_cut)
    assert lazy.context == eager.context and lazy.kept_index == eager.kept_index
    assert [r.model_dump() for r in lazy.reports] == [r.model_dump() for r in eager.reports]
    for name, kept in lazy.kept_index.items():  # a shortened row's evidence quotes the shortened text in both
        assert [lazy_ev[name][i] for i in kept] == [eager_ev[name][i] for i in kept]
    assert count_tokens(lazy.context, MODEL) == lazy.total_tokens <= total


def test_rows_the_budget_never_reaches_are_never_rendered_counted_or_cited():
    descs = [f"Relation {i} says something about the ghosts and the clerk." for i in range(500)]
    sec, evidence = relation_section(_relations(descs), None, MODEL)
    out = allocate([sec], 300, MODEL)
    kept = out.kept_index["relationships"]
    assert 0 < len(kept) < 16 and out.reports[0].candidates == 500
    assert sec.rows.made() <= 16 + 1  # the kept rows and the one shortened into the rest of the room
    assert sec.row_tokens.counted() == 16  # the first batch only
    assert [evidence[i].cite for i in kept] == [f"R{i + 1}" for i in kept] and evidence.made() <= 17
