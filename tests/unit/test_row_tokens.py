"""Token counts stored with each entity and relation row at ingestion: the merge stage writes them, the context
builders pack with them instead of encoding every row again, and a context never exceeds its budget whatever the
stored counts say (right, missing as in older data, or wrong)."""

from __future__ import annotations

import sys
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from shared.config import get_settings
from shared.domain.models import Chunk, Entity, EntityFragment, ExtractionResult, Relation, RelationFragment
from shared.domain.query.context_common import graph_row_tokens
from shared.domain.query.context_local import build_local_context, entity_static, relation_static
from shared.domain.query.line_tokens import SEAM_ENCODINGS
from shared.domain.query.params import QueryParam, resolve
from shared.domain.tokens import count_tokens, get_encoding
from shared.infra.store.redis_graph import GraphStore
from shared.pipeline.merge_stage import run_merge_batch, text_tokens
from tests.memory_graph import InMemoryGraphReader

sys.path.insert(0, str(Path(__file__).parent))
from test_query_fakes import make_graph  # noqa: E402

MODEL = "gpt-4o-mini"
ENC = get_encoding(MODEL).name
PROP = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
HITS = [("SCROOGE", 0.9), ("BOB CRATCHIT", 0.8), ("MARLEY", 0.7), ("TINY TIM", 0.6)]


def test_the_merge_stage_stores_each_rows_static_count_and_no_estimate_its_queries_do_not_read(redis_client, tenant):
    store = GraphStore(redis_client, tenant)
    store.save_extraction(ExtractionResult(chunk_id="c1", entities=[
        EntityFragment(name="SCROOGE", type="person", description="A miser, \"humbug\" he says.", source_id="c1")],
        relations=[RelationFragment(src="SCROOGE", tgt="MARLEY", description="Partners in business.",
                                    source_id="c1")]))
    cfg = get_settings()
    run_merge_batch(store, store.dirty_members("entities"), store.dirty_members("relations"), cfg, None)
    entity = store.entities(["SCROOGE"])["SCROOGE"]
    relation = next(iter(store.relations_of(["SCROOGE"], 10)))
    model = cfg.llm_model
    assert get_encoding(model).name in SEAM_ENCODINGS  # its queries count rows from their static counts
    assert entity.text_tokens == relation.text_tokens == {}
    assert entity.row_tokens == {ENC: count_tokens(entity_static(entity), model)}
    assert relation.row_tokens == {ENC: count_tokens(relation_static(relation), model)}


def _with_counts(reader: InMemoryGraphReader, counts) -> InMemoryGraphReader:
    """The reader's entities and relations with ``counts(text)`` stored (None: no count, as in older data)."""
    for name, e in list(reader.entity_map.items()):
        n = counts(e.description)
        reader.entity_map[name] = e.model_copy(update={"text_tokens": {} if n is None else {ENC: n}})
    for key, r in list(reader.relation_map.items()):
        n = counts(r.description)
        reader.relation_map[key] = r.model_copy(update={"text_tokens": {} if n is None else {ENC: n}})
    return reader


def test_stored_counts_give_the_context_that_counting_every_row_gives():
    param = resolve(QueryParam(query="Who is Scrooge's clerk?", model=MODEL))
    counted = build_local_context(make_graph()[0], HITS, param, [("chunk-3", 1.0)])
    stored = build_local_context(_with_counts(make_graph()[0], lambda t: count_tokens(t, MODEL)), HITS, param,
                                 [("chunk-3", 1.0)])
    assert stored[0] == counted[0] and stored[1].total_tokens == counted[1].total_tokens


def test_a_row_without_a_stored_count_is_counted_whole():
    cells = [["E1", "A", "person", "has, a comma", 1], ["E2", "B", "person", "plain words here", 2]]
    rows = [Entity(name="A", type="person", description="has, a comma", degree=1,
                   text_tokens={ENC: count_tokens("has, a comma", MODEL)}),
            Entity(name="B", type="person", description="plain words here", degree=2)]
    estimate = graph_row_tokens(cells, 3, rows, 1, MODEL)
    assert estimate[1] == count_tokens("E2,B,person,plain words here,2", MODEL)
    assert estimate[0] >= count_tokens('E1,A,person,"has, a comma",1', MODEL)
    older = [r.model_copy(update={"text_tokens": {}}) for r in rows]
    assert graph_row_tokens(cells, 3, older, 1, MODEL) is None  # older data only: the allocator counts


def _big_graph(desc_words: list[int]) -> InMemoryGraphReader:
    r = InMemoryGraphReader()
    for i, words in enumerate(desc_words):
        cid = f"chunk-{i}"
        r.chunk_map[cid] = Chunk(id=cid, doc_id="d", index=i, text=" ".join(["lorem"] * 40), tokens=40)
        r.entity_map[f"E{i}"] = Entity(name=f"E{i}", description=", ".join(["ipsum \"x\""] * words), source_ids=[cid],
                                       degree=i % 4)
        if i:
            r.relation_map[(f"E{i - 1}", f"E{i}")] = Relation(src=f"E{i - 1}", tgt=f"E{i}", weight=i % 5,
                                                               description=" ".join(["dolor"] * words))
    return r


@PROP
@given(st.lists(st.integers(min_value=0, max_value=300), min_size=12, max_size=12),
       st.integers(min_value=200, max_value=5000), st.sampled_from(["right", "zero", "double", "missing"]))
def test_a_context_never_exceeds_its_budget_whatever_the_stored_counts_say(desc, total, kind):
    counts = {"right": lambda t: count_tokens(t, MODEL), "zero": lambda t: 0,
              "double": lambda t: 2 * count_tokens(t, MODEL), "missing": lambda t: None}[kind]
    reader = _with_counts(_big_graph(desc), counts)
    p = resolve(QueryParam(query="lorem ipsum", model=MODEL, max_total_tokens=total, max_entity_tokens=total // 4,
                           max_relation_tokens=total // 3))
    hits = [(f"E{i}", 1.0 - i / 20) for i in range(12)]
    ctx, rep, _ = build_local_context(reader, hits, p, [(f"chunk-{i}", 1.0) for i in (11, 5, 0)], "sys prompt")
    assert count_tokens(ctx, MODEL) == rep.total_tokens <= rep.total_allowed
    for s in rep.sections:
        assert s.tokens_used <= s.tokens_allowed


def test_text_tokens_is_keyed_by_the_models_encoding_and_kept_only_where_rows_have_no_static_count(monkeypatch):
    from shared.pipeline import merge_stage

    assert text_tokens("Bob Cratchit, a clerk.", MODEL) == {}
    monkeypatch.setattr(merge_stage, "SEAM_ENCODINGS", ())  # an encoding whose queries estimate from it
    assert text_tokens("Bob Cratchit, a clerk.", MODEL) == {ENC: count_tokens("Bob Cratchit, a clerk.", MODEL)}


ROW_CHARS = st.sampled_from(list('ab Z9,."\'`-_/\\\n\r\t é—…😀()[]{}:;!?#*'))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.lists(st.text(ROW_CHARS, max_size=30), max_size=4), min_size=1, max_size=4),
       st.sampled_from(["gpt-4o-mini", "gpt-4", "o200k_base", "cl100k_base"]))
def test_joined_sections_are_counted_exactly_from_their_own_counts(sections, model):
    from shared.domain.query.budget import SECTION_SEPARATOR, Section, joined_tokens

    names = ["reports", "entities", "relationships", "sources"]
    texts = [Section(names[i], rows, header="id,x").render(rows) for i, rows in enumerate(sections)]
    texts = [t for t in texts if t]
    if texts:
        assert joined_tokens(texts, model) == count_tokens(SECTION_SEPARATOR.join(texts), model)


@settings(max_examples=400, deadline=None)
@given(st.lists(st.text(ROW_CHARS, max_size=40), min_size=1, max_size=6), st.sampled_from(["", "id,x", "a, b\t"]),
       st.sampled_from(["gpt-4o-mini", "gpt-4", "o200k_base", "cl100k_base"]))
def test_a_section_is_counted_exactly_from_its_lines(rows, header, model):
    """The allocator counts a rendered section from its head, each row with its line break (memoized per row)
    and the fence: exactly the rendered text's count, whatever the rows hold (rows the line rule does not cover,
    such as one starting with a space or a slash, make it count the whole text)."""
    from shared.domain.query.budget import Section, section_tokens
    from shared.domain.query.line_tokens import exact_lines

    sec = Section("entities", rows, header=header)
    assert section_tokens(sec, rows, model) == count_tokens(sec.render(rows), model)
    lined = [f"E{i}{row}" for i, row in enumerate(rows)]  # rows as the builders write them: an id first
    assert exact_lines(lined, model) or get_encoding(model).name not in ("o200k_base", "cl100k_base")
    assert section_tokens(sec, lined, model) == count_tokens(sec.render(lined), model)
    cited = [f"{'ESRx'[i % 4]}{i * 977},{row}" for i, row in enumerate(rows)]  # counted in two parts
    assert section_tokens(sec, cited, model) == count_tokens(sec.render(cited), model)
