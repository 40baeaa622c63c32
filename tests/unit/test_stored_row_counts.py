"""Token counts stored with each row at ingestion (``shared.domain.query.row_counts``): the chunk and merge stages
store them, the split rule they rely on holds for both encoders, a context built from them is the one counting every
row gives and encodes no chunk text or description, wrong stored counts never make a context exceed its budget, and
the warm-up puts them in the memo instead of encoding the rows."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from shared.config import get_settings
from shared.domain import tokens
from shared.domain.models import Chunk, Document, Entity, EntityFragment, ExtractionResult, Relation, RelationFragment
from shared.domain.packing import csv_row
from shared.domain.query.context_local import (
    ENTITY_NUMERIC,
    build_local_context,
    entity_cells,
    entity_static,
    relation_cells,
    relation_static,
)
from shared.domain.query.line_tokens import shared_cut
from shared.domain.query.params import QueryParam, resolve
from shared.domain.query.row_counts import (
    counts_after,
    line_rest,
    rest_counts,
    row_digest,
    source_body,
    static_line,
    stored_counts,
)
from shared.domain.tokens import count_tokens, get_encoding
from shared.infra.store.redis_graph import GraphStore
from tests.memory_graph import InMemoryGraphReader
from tests.unit.test_query_fakes import make_graph

MODEL = "gpt-4o-mini"
ENC = get_encoding(MODEL).name
CHARS = st.sampled_from(list('ab Z9,."\'`-_/\\\n\r\t é—…😀()[]{}:;!?#*0123²٣½$%&+=<>|~^@'))
# CHARS and characters whose whitespace-ness Python and the encoders' patterns judge apart (\x1c: Python only) or
# alike (U+00A0, U+2028, U+3000; U+200B: neither), a combining mark, and a contraction's letters
WIDE = st.one_of(CHARS, st.sampled_from(["\u00a0", "\u0301", "\u3000", "\x1c", "\u2028", "\u200b", "s", "l"]))
NUMBERS = st.one_of(st.integers(min_value=-3, max_value=10**7), st.sampled_from([1.0, 0.5, 1e-05, 2.5e10, -0.5]),
                    st.floats(allow_nan=True, allow_infinity=True, width=32),
                    st.sampled_from(["1.0", "0.5", "1e-05", "10", "007"]))


def true_count(text: str, model: str) -> int:
    """The encoder's count, memo bypassed."""
    return len(get_encoding(model).encode_ordinary(text))


@pytest.fixture
def encoded(monkeypatch):
    """Every text the gpt-4o-mini encoder encodes from now on (the memo is emptied first: a cold process)."""
    enc, seen = get_encoding(MODEL), []
    ordinary = enc.encode_ordinary
    monkeypatch.setattr(enc, "encode_ordinary", lambda text: seen.append(text) or ordinary(text))
    monkeypatch.setattr(enc, "encode_ordinary_batch", lambda texts, **kw: [enc.encode_ordinary(t) for t in texts])
    tokens._count_cache.clear()
    return seen


def quoting(texts: list[str], encoded: list[str]) -> list[str]:
    """The encoded texts that hold one of ``texts`` (a chunk text or a description)."""
    return [e for e in encoded if any(t and t in e for t in texts)]


# ------------------------------------------------------------------ the split rule, against both encoders
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.text(CHARS, max_size=40), min_size=3, max_size=3), st.lists(NUMBERS, min_size=1, max_size=2),
       st.sampled_from(["o200k_base", "cl100k_base"]))
def test_a_rows_static_part_plus_its_numeric_suffix_counts_as_its_whole_line(texts, numbers, model):
    cells = ["E1", *texts, *numbers]
    rest, static = line_rest(cells), static_line(cells, len(numbers))
    assert rest.startswith(static) and static.endswith(",")
    if rest[len(static)] in "0123456789":  # the rule: a digit never shares a piece with what precedes it
        assert true_count(static, model) + true_count(rest[len(static):], model) == true_count(rest, model)
    row = Entity(name="x")
    row.row_tokens, row.row_digest = stored_counts([static], model)[0]
    tokens._count_cache.clear()
    assert rest_counts([cells], [row], len(numbers), model) == [true_count(rest, model)]  # negatives: counted whole
    assert tokens._count_cache.get(get_encoding(model).name, rest) == true_count(rest, model)  # left in the memo


def test_an_entitys_and_a_relations_static_part_is_their_row_without_its_numeric_cells():
    e = Entity(name="SCROOGE", type="person", description='A "miser", he says', degree=12)
    r = Relation(src="SCROOGE", tgt="MARLEY", description="Partners", weight=0.25, rank=7)
    assert line_rest(entity_cells("E3", e)) == entity_static(e) + "12\n"
    assert line_rest(relation_cells("R1", r)) == relation_static(r) + "0.25,7\n"
    assert entity_static(e) == csv_row(["", "SCROOGE", "person", 'A "miser", he says', ""])


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(WIDE, max_size=60), st.text(WIDE, max_size=30), st.text(WIDE, max_size=30),
       st.sampled_from(["o200k_base", "cl100k_base"]))
def test_a_text_counts_as_its_two_sides_at_the_cut_two_texts_share(shared, tail_a, tail_b, model):
    a, b = shared + tail_a, shared + tail_b
    cut = shared_cut(a, b)
    assert a[:cut] == b[:cut] and (cut == 0 or (a[cut] == " " and not a[cut - 1].isspace()))
    for text in (a, b):
        assert true_count(text, model) == true_count(text[:cut], model) + true_count(text[cut:], model)
    for i, ch in enumerate(a):  # and at every such space, not only the last shared one
        if i and ch == " " and not a[i - 1].isspace():
            assert true_count(a, model) == true_count(a[:i], model) + true_count(a[i:], model)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(WIDE, max_size=80), st.text(WIDE, max_size=20), st.text(WIDE, max_size=40),
       st.sampled_from(["o200k_base", "cl100k_base"]), st.sampled_from(["right", "stale", "none", "other"]))
def test_a_rewritten_rows_count_from_its_former_count_is_the_one_counting_gives(shared, old, new, model, kind):
    before, text = shared + old, shared + new
    row = Entity(name="x")
    row.row_tokens, row.row_digest = stored_counts([before], model)[0]
    if kind == "stale":  # the count was written for another text: never trusted
        row.row_tokens = {get_encoding(model).name: row.row_tokens[get_encoding(model).name] + 1}
    elif kind == "other":
        row.row_tokens, row.row_digest = stored_counts([before + "x"], model)[0]
    counts, digest = counts_after(text, None if kind == "none" else before, row, model)
    expected = {get_encoding(model).name: true_count(text, model)}
    assert counts == expected and digest == row_digest(text, expected)


# ------------------------------------------------------------------ ingestion stores them
def test_the_chunk_stage_stores_each_chunks_source_row_count(redis_client, tenant):
    from shared.infra.jobs.store import JobStore
    from shared.pipeline.chunk_stage import run_chunk

    store, jobs, cfg = GraphStore(redis_client, tenant), JobStore(redis_client, tenant), get_settings()
    text = " ".join(f'Scrooge said "humbug", {i} times.\nMarley, his partner, was dead.' for i in range(400))
    store.put_document(Document(id="d1", tenant=tenant), text)
    jobs.create("j1", "ingest", ["d1"])
    run_chunk(store, jobs, cfg, "j1", "d1")
    chunks = list(store.chunks(store.all_chunk_ids()).values())
    assert len(chunks) > 1
    encoding = get_encoding(cfg.llm_model).name
    for c in chunks:
        expected = {encoding: true_count(source_body(c.text), cfg.llm_model)}
        assert c.row_tokens == expected and c.row_digest == row_digest(source_body(c.text), expected)


def test_the_merge_stage_stores_each_rows_static_count(redis_client, tenant):
    from shared.pipeline.merge_stage import run_merge_batch

    store, cfg = GraphStore(redis_client, tenant), get_settings()
    store.save_extraction(ExtractionResult(chunk_id="c1", entities=[
        EntityFragment(name="SCROOGE", type="person", description='A miser, "humbug" he says.', source_id="c1")],
        relations=[RelationFragment(src="SCROOGE", tgt="MARLEY", description="Partners, 7 years.", weight=3.5,
                                    source_id="c1")]))
    run_merge_batch(store, store.dirty_members("entities"), store.dirty_members("relations"), cfg, None)
    entity = store.entities(["SCROOGE"])["SCROOGE"]
    relation = next(iter(store.relations_of(["SCROOGE"], 10)))
    encoding = get_encoding(cfg.llm_model).name
    for row, static in ((entity, entity_static(entity)), (relation, relation_static(relation))):
        expected = {encoding: true_count(static, cfg.llm_model)}
        assert row.row_tokens == expected and row.row_digest == row_digest(static, expected)
    tokens._count_cache.clear()
    for degree in (0, 7, 12345):  # whatever degree the graph gives it later
        cells = entity_cells("E1", entity.model_copy(update={"degree": degree}))
        assert rest_counts([cells], [entity], ENTITY_NUMERIC, cfg.llm_model) == [true_count(line_rest(cells),
                                                                                             cfg.llm_model)]



def test_a_fold_counts_the_parts_it_adds_not_the_whole_row_again(redis_client, tenant, encoded):
    from shared.pipeline.merge_stage import run_merge_batch

    store, cfg = GraphStore(redis_client, tenant), get_settings()
    cfg = cfg.model_copy(update={"merge": cfg.merge.model_copy(update={"force_llm_summary_on_merge": 100})})
    first = " ".join(f"Scrooge counted coin number {i} in the cold counting-house." for i in range(60))
    for i, description in enumerate([first, "He sent the boy for the turkey."]):
        store.save_extraction(ExtractionResult(chunk_id=f"c{i}", entities=[
            EntityFragment(name="SCROOGE", type="person", description=description, source_id=f"c{i}")]))
        encoded.clear()
        run_merge_batch(store, store.dirty_members("entities"), [], cfg, None)
    second = list(encoded)  # what the second merge encoded
    entity = store.entities(["SCROOGE"])["SCROOGE"]
    static = entity_static(entity)
    assert entity.source_ids == ["c0", "c1"] and "turkey" in static and first in static
    expected = {get_encoding(cfg.llm_model).name: true_count(static, cfg.llm_model)}
    assert entity.row_tokens == expected and entity.row_digest == row_digest(static, expected)
    assert entity.text_tokens == {}  # the static count serves queries under this encoding
    assert not [e for e in second if e.startswith(",SCROOGE,")]  # its count encoded only what follows the static
    assert any(e.endswith("turkey.,") and len(e) < 100 for e in second)  # part the two rows share


# ------------------------------------------------------------------ the query side
def with_stored_counts(reader: InMemoryGraphReader, wrong=None) -> InMemoryGraphReader:
    """The reader's chunks, entities and relations with the counts ingestion stores; ``wrong(text, counts, digest)``
    replaces them (``None``: as stored)."""
    def stamp(row, text: str):
        counts, digest = stored_counts([text], MODEL)[0]
        if wrong is not None:
            counts, digest = wrong(text, counts, digest)
        return row.model_copy(update={"row_tokens": counts, "row_digest": digest})

    for cid, c in list(reader.chunk_map.items()):
        reader.chunk_map[cid] = stamp(c, source_body(c.text))
    for name, e in list(reader.entity_map.items()):
        reader.entity_map[name] = stamp(e, entity_static(e))
    for key, r in list(reader.relation_map.items()):
        reader.relation_map[key] = stamp(r, relation_static(r))
    return reader


def big_graph(descs: list[str]) -> InMemoryGraphReader:
    r = InMemoryGraphReader()
    for i, desc in enumerate(descs):
        cid = f"chunk-{i}"
        r.chunk_map[cid] = Chunk(id=cid, doc_id="d", index=i, text=f"lorem {desc} " * (1 + i % 5), tokens=40)
        r.entity_map[f"E{i}"] = Entity(name=f"E{i}", description=desc, source_ids=[cid], degree=(i * 7) % 13)
        if i:
            r.relation_map[(f"E{i - 1}", f"E{i}")] = Relation(src=f"E{i - 1}", tgt=f"E{i}", weight=(i % 5) / 4,
                                                               rank=i, description=f"{desc[::-1]} ipsum")
    return r


def local(reader: InMemoryGraphReader, total: int = 30000):
    p = resolve(QueryParam(query="lorem ipsum", model=MODEL, max_total_tokens=total, max_entity_tokens=total // 4,
                           max_relation_tokens=total // 3))
    hits = [(name, 1.0 - i / 100) for i, name in enumerate(reader.entity_map)]
    return build_local_context(reader, hits, p, [(cid, 1.0) for cid in list(reader.chunk_map)[::-1]], "sys prompt")


def test_a_context_built_from_stored_counts_is_identical_and_encodes_no_chunk_text_or_description(encoded):
    param = resolve(QueryParam(query="Who is Scrooge's clerk?", model=MODEL, max_total_tokens=30000))
    hits = [("SCROOGE", 0.9), ("BOB CRATCHIT", 0.8), ("MARLEY", 0.7), ("TINY TIM", 0.6)]
    counted = build_local_context(make_graph()[0], hits, param, [("chunk-3", 1.0)])
    reader = with_stored_counts(make_graph()[0])
    tokens._count_cache.clear()
    encoded.clear()
    stored = build_local_context(reader, hits, param, [("chunk-3", 1.0)])
    assert stored[0] == counted[0] and stored[1] == counted[1]
    assert [e.cite for e in stored[2].evidence] == [e.cite for e in counted[2].evidence]
    assert stored[2].chunks and stored[2].entities and stored[2].relations  # every section has rows
    texts = [c.text for c in reader.chunk_map.values()] + [e.description for e in reader.entity_map.values()]
    texts += [r.description for r in reader.relation_map.values()]
    assert quoting(texts, encoded) == []  # citation ids, numeric suffixes, heads, report rows, the query: no row


def test_a_naive_context_from_stored_counts_encodes_no_chunk_text_not_even_whole(encoded):
    """One section: its own exact count is the context's (the context is not encoded again whole)."""
    from shared.domain.query.context_naive import build_naive_context

    param = resolve(QueryParam(query="Who is Scrooge's clerk?", mode="naive", model=MODEL, max_total_tokens=30000))
    hits = [(cid, 1.0 - i / 10) for i, cid in enumerate(make_graph()[0].chunk_map)]
    counted = build_naive_context(make_graph()[0], hits, param)
    reader = with_stored_counts(make_graph()[0])
    tokens._count_cache.clear()
    encoded.clear()
    ctx, rep, sources = build_naive_context(reader, hits, param)
    assert (ctx, rep) == counted[:2] and len(sources.chunks) == len(hits)
    assert quoting([c.text for c in reader.chunk_map.values()], encoded) == []
    assert true_count(ctx, MODEL) == rep.total_tokens


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.text(CHARS, min_size=1, max_size=200), min_size=12, max_size=12),
       st.integers(min_value=150, max_value=6000))
def test_stored_counts_give_the_context_that_counting_every_row_gives_at_any_budget(descs, total):
    tokens._count_cache.clear()
    counted = local(big_graph(descs), total)
    tokens._count_cache.clear()
    stored = local(with_stored_counts(big_graph(descs)), total)
    assert stored[0] == counted[0] and stored[1] == counted[1]
    assert count_tokens(stored[0], MODEL) == stored[1].total_tokens <= stored[1].total_allowed


WRONG = {
    "zero": lambda text, counts, digest: ({ENC: 0}, row_digest(text, {ENC: 0})),
    "negative": lambda text, counts, digest: ({ENC: -5}, row_digest(text, {ENC: -5})),
    "too_many": lambda text, counts, digest: ({ENC: 4 * len(text) + 8}, row_digest(text, {ENC: 4 * len(text) + 8})),
    "edited": lambda text, counts, digest: ({ENC: counts[ENC] // 2}, digest),  # the count rewritten alone
    "doubled": lambda text, counts, digest: ({ENC: 2 * counts[ENC]}, digest),
    "no_digest": lambda text, counts, digest: ({ENC: 1}, 0),  # written by something that does not know digests
    "stale": lambda text, counts, digest: stored_counts([text[: len(text) // 2]], MODEL)[0],  # an older text's
    "other_encoding": lambda text, counts, digest: stored_counts([text], "cl100k_base")[0],
}


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.text(CHARS, min_size=1, max_size=120), min_size=12, max_size=12),
       st.integers(min_value=150, max_value=5000), st.sampled_from(sorted(WRONG)))
def test_wrong_stored_counts_never_make_a_context_exceed_its_budget(descs, total, kind):
    tokens._count_cache.clear()
    counted = local(big_graph(descs), total)
    tokens._count_cache.clear()
    ctx, rep, _ = local(with_stored_counts(big_graph(descs), WRONG[kind]), total)
    assert count_tokens(ctx, MODEL) == rep.total_tokens <= rep.total_allowed
    assert all(s.tokens_used <= s.tokens_allowed for s in rep.sections)
    assert (ctx, rep) == counted[:2]  # a count it cannot trust is not used: the rows are counted


# ------------------------------------------------------------------ the warm-up
def test_the_warm_up_puts_stored_counts_in_the_memo_and_encodes_only_older_rows(redis_client, tenant, encoded):
    from shared.infra.store import warmup
    from shared.pipeline.merge_stage import run_merge_batch

    store, cfg = GraphStore(redis_client, tenant), get_settings()
    model = cfg.llm_model
    texts = [f"Scrooge, a miser of {i} shillings, said \"humbug\".\nMarley was dead." for i in range(6)]
    counted = [Chunk(id=f"c{i}", doc_id="d", index=i, text=t, tokens=20) for i, t in enumerate(texts)]
    counted = [c.model_copy(update=dict(zip(("row_tokens", "row_digest"), n, strict=True)))
               for c, n in zip(counted, stored_counts([source_body(t) for t in texts], model), strict=True)]
    older = Chunk(id="c-old", doc_id="d", index=9, text="An older chunk, ingested without counts.", tokens=9)
    store.put_chunks([*counted, older])
    store.save_extraction(ExtractionResult(chunk_id="c0", entities=[
        EntityFragment(name=f"N{i}", type="person", description=f"Person {i}, \"odd\" and kind.", source_id="c0")
        for i in range(5)], relations=[RelationFragment(src="N0", tgt=f"N{i}", description=f"Knows {i}, 1843.",
                                                        weight=i / 3, source_id="c0") for i in range(1, 5)]))
    run_merge_batch(store, store.dirty_members("entities"), store.dirty_members("relations"), cfg, None)
    entities, relations = store.all_entities(), store.all_relations()
    tokens._count_cache.clear()
    encoded.clear()
    warmup._count_rows(store, model, True)
    descriptions = [e.description for e in entities.values()] + [r.description for r in relations.values()]
    assert quoting(texts + descriptions, encoded) == []  # nothing ingested with counts was encoded
    assert quoting([older.text], encoded) == [source_body(older.text)]  # the older chunk was
    encoding = get_encoding(model).name
    for e in entities.values():  # a later query's exact check finds every row in the memo, rightly counted
        line = line_rest(entity_cells("E9", e))
        assert tokens._count_cache.get(encoding, line) == true_count(line, model)
    for r in relations.values():
        line = line_rest(relation_cells("R9", r))
        assert tokens._count_cache.get(encoding, line) == true_count(line, model)
    for t in texts:
        assert tokens._count_cache.get(encoding, source_body(t)) == true_count(source_body(t), model)


def test_the_warm_ups_whole_graph_read_leaves_a_first_query_no_row_to_parse(redis_client, tenant, monkeypatch):
    """The warm-up counts a small graph's rows from one read of it, and files the parsed rows in the process's
    row caches (``GraphStore.read_whole_graph``): a query then reads no entity or relation row again, and gets
    the stored ones (with their degree read now); a write after the warm-up is read fresh."""
    from shared.infra.store import redis_graph, warmup
    from shared.pipeline.merge_stage import run_merge_batch

    store, cfg = GraphStore(redis_client, tenant), get_settings()
    store.save_extraction(ExtractionResult(chunk_id="c0", entities=[
        EntityFragment(name=f"N{i}", type="person", description=f"Person {i}.", source_id="c0") for i in range(4)],
        relations=[RelationFragment(src="N0", tgt=f"N{i}", description=f"Knows {i}.", weight=1.0, source_id="c0")
                   for i in range(1, 4)]))
    run_merge_batch(store, store.dirty_members("entities"), store.dirty_members("relations"), cfg, None)
    store.set_degrees({"N0": 3, "N1": 1})
    redis_graph._ENTITY_ROWS.clear()
    redis_graph._RELATION_ROWS.clear()
    warmup._count_rows(store, cfg.llm_model, True)
    parsed: list[str] = []
    real = redis_graph.unpack_row  # every row the store parses goes through it
    monkeypatch.setattr(redis_graph, "unpack_row",
                        lambda model, raw, key: parsed.append(model.__name__) or real(model, raw, key))
    entities = store.entities([f"N{i}" for i in range(4)])
    relations = store.relations([("N0", f"N{i}") for i in range(1, 4)])
    assert parsed == []  # every row came from the warm-up's read
    assert entities == store.all_entities()
    assert (entities["N0"].degree, entities["N1"].degree) == (3, 1)
    assert relations == store.all_relations()
    store.save_extraction(ExtractionResult(chunk_id="c1", entities=[
        EntityFragment(name="N1", type="person", description="Person 1, later.", source_id="c1")], relations=[]))
    run_merge_batch(store, store.dirty_members("entities"), store.dirty_members("relations"), cfg, None)
    parsed.clear()  # (the merge read the rows it merged)
    assert "later" in store.entities(["N1"])["N1"].description  # a new graph version: read again
    assert parsed == ["Entity"]
