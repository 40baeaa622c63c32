import sys
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from shared.domain.models import Chunk, Entity, Relation
from shared.domain.query.context_causal import build_causal_context, extended_node_count
from shared.domain.query.context_common import csv_row, fuse_chunk_rankings
from shared.domain.query.context_hybrid import build_hybrid_context
from shared.domain.query.context_local import build_local_context
from shared.domain.query.context_naive import build_naive_context
from shared.domain.query.params import QueryParam, resolve
from shared.domain.query.truncation import OMISSION, relevance_truncate, structure_truncate
from shared.domain.tokens import count_tokens
from tests.memory_graph import InMemoryGraphReader

sys.path.insert(0, str(Path(__file__).parent))
from test_query_fakes import make_graph  # noqa: E402

PROP = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
ALL_ENT = [("SCROOGE", 0.9), ("BOB CRATCHIT", 0.8), ("MARLEY", 0.7), ("TINY TIM", 0.6)]


def test_local_context_has_the_seed_sections_with_id_columns_and_sources():
    reader, _ = make_graph()
    p = resolve(QueryParam(query="Who is Scrooge's clerk?"))
    ctx, rep, src = build_local_context(reader, ALL_ENT, p, [("chunk-3", 1.0)])
    for title in ("-----Reports-----", "-----Entities-----", "-----Relationships-----", "-----Sources-----"):
        assert title in ctx
    assert ctx.index("-----Reports-----") < ctx.index("-----Entities-----") < ctx.index("-----Sources-----")
    assert "id,entity,type,description,rank" in ctx and "E1,SCROOGE" in ctx
    assert "id,content" in ctx and src.citations()["S1"] == "chunk-3"  # short citations, resolved
    assert "chunk-3" not in ctx and "doc-a" in src.documents
    assert src.entities[0] == "SCROOGE"  # highest degree first
    assert "SCROOGE->BOB CRATCHIT" in src.relations and src.reports and "doc-a" in src.documents
    assert src.citations()["E1"] == "SCROOGE"
    assert rep.total_tokens == count_tokens(ctx) <= rep.total_allowed
    assert rep.section("entities").summary().startswith("4 entities found, 4 kept")


def test_local_reports_are_read_by_the_entities_communities_not_every_community():
    """A cold worker's first local query used to parse every community and report of the tenant to rank the few
    its entities belong to; the reports come by id now, with the same choice (levels up to the query's)."""
    from shared.domain.query.context_local import related_reports

    class ByIdOnly(InMemoryGraphReader):
        def community_rows(self):
            raise AssertionError("a local query read every community")

        def communities(self):
            raise AssertionError("a local query read every community")

    reader, _ = make_graph()
    by_id = ByIdOnly(**{f: getattr(reader, f) for f in reader.__dataclass_fields__})
    names = ["BOB CRATCHIT", "TINY TIM", "SCROOGE"]
    levels = {r.community_id: r.level for r in related_reports(by_id, names, 1)}
    assert levels and max(levels.values()) == 1 and "L1-1" in levels
    assert all(level == 0 for level in (r.level for r in related_reports(by_id, names, 0)))


def test_relations_ordered_by_weight_then_rank():
    reader, _ = make_graph()
    _, _, src = build_local_context(reader, ALL_ENT, resolve(QueryParam(query="x")))
    assert src.relations[0] == "BOB CRATCHIT->TINY TIM"  # weight 9


def _big_graph(desc_words, chunk_words, n=12):
    r = InMemoryGraphReader()
    for i in range(n):
        cid = f"chunk-{i}"
        r.chunk_map[cid] = Chunk(
            id=cid, doc_id=f"doc-{i % 3}", index=i, text=" ".join(["lorem"] * chunk_words[i]), tokens=chunk_words[i]
        )
        r.entity_map[f"E{i}"] = Entity(
            name=f"E{i}", description=" ".join(["ipsum"] * desc_words[i]), source_ids=[cid], degree=i % 4
        )
        if i:
            r.relation_map[(f"E{i - 1}", f"E{i}")] = Relation(
                src=f"E{i - 1}", tgt=f"E{i}", weight=i % 5, description=" ".join(["dolor"] * desc_words[i])
            )
    return r


sizes = st.lists(st.integers(min_value=0, max_value=400), min_size=12, max_size=12)


@PROP
@given(
    sizes,
    sizes,
    st.integers(min_value=300, max_value=6000),
    st.sampled_from(["local", "hybrid", "causal"]),
    st.sampled_from(["relevance", "structure", "none"]),
    st.sampled_from(["relevance", "shortest_first"]),
)
def test_graph_contexts_never_exceed_section_or_total_budget(desc, chunk, total, mode, strategy, order):
    reader = _big_graph(desc, chunk)
    p = resolve(
        QueryParam(
            query="lorem ipsum",
            max_total_tokens=total,
            max_entity_tokens=total // 4,
            max_relation_tokens=total // 3,
            source_truncation=strategy,
            text_order=order,
            causal_network_tokens=total // 2,
        )
    )
    hits = [(f"E{i}", 1.0 - i / 20) for i in range(12)]
    direct = [(f"chunk-{i}", 1.0) for i in (11, 5, 0)]
    if mode == "local":
        ctx, rep, _ = build_local_context(reader, hits, p, direct, "sys prompt")
    elif mode == "hybrid":
        ctx, rep, _ = build_hybrid_context(reader, hits[:6], hits[6:], p, direct, "sys prompt")
    else:
        ctx, rep, _ = build_causal_context(reader, hits, p, direct, "sys prompt")
    assert count_tokens(ctx) == rep.total_tokens <= rep.total_allowed
    for s in rep.sections:
        assert s.tokens_used <= s.tokens_allowed
    if mode == "causal":
        cap = min(p.causal_network_tokens, rep.total_allowed)
        limits = {"entities": int(cap * 0.4), "relationships": int(cap * 0.4), "sources": cap}
        for s in rep.sections:
            assert s.tokens_used <= limits[s.name]


@PROP
@given(sizes, st.integers(min_value=50, max_value=3000))
def test_naive_context_never_exceeds_budget(chunk, total):
    reader = _big_graph([1] * 12, chunk)
    p = resolve(QueryParam(query="lorem", max_total_tokens=total))
    ctx, rep, src = build_naive_context(reader, [(f"chunk-{i}", 1.0) for i in range(12)], p)
    assert count_tokens(ctx) <= rep.total_allowed
    assert rep.section("sources").candidates == 12
    assert len(src.chunks) + len(src.omitted_chunks) == 12


def test_graph_modes_keep_bm25_top_chunks_under_tight_budget():
    reader = _big_graph([30] * 12, [120] * 12)
    p = resolve(QueryParam(query="x", max_total_tokens=1600))
    hits = [(f"E{i}", 1.0) for i in range(12)]
    _, rep, src = build_local_context(reader, hits, p, [("chunk-11", 5.0), ("chunk-10", 4.0)])
    assert rep.section("sources").truncated
    assert src.chunks[0] == "chunk-11"
    ranking = fuse_chunk_rankings([("d1", 1), ("d2", 1), ("d3", 1)], ["l1", "d3", "l2"])
    assert [c for c, _ in ranking][:4] == ["d1", "l1", "d2", "d3"]


def test_shortest_first_text_order():
    reader = _big_graph([1] * 12, [50 - i for i in range(12)])
    p = resolve(QueryParam(query="lorem", text_order="shortest_first"))
    _, _, src = build_naive_context(reader, [(f"chunk-{i}", 1.0) for i in range(12)], p)
    assert src.chunks[0] == "chunk-11"
    _, _, src2 = build_naive_context(
        reader, [(f"chunk-{i}", 1.0) for i in range(12)], resolve(QueryParam(query="lorem"))
    )
    assert src2.chunks[0] == "chunk-0"


def test_partial_last_chunk_uses_relevance_truncation():
    reader = InMemoryGraphReader()
    filler = ". ".join(f"Sentence {i} talks about weather" for i in range(80))
    text = filler + ". The secret password is swordfish."
    reader.chunk_map["c1"] = Chunk(id="c1", doc_id="d", index=0, text=text, tokens=0)
    p = resolve(QueryParam(query="secret password", max_total_tokens=450))
    ctx, rep, _ = build_naive_context(reader, [("c1", 1.0)], p)
    assert "swordfish" in ctx and rep.section("sources").partial_item
    assert count_tokens(ctx) <= rep.total_allowed


def test_causal_extended_nodes_and_split():
    p = resolve(QueryParam(query="why", budget_split="fixed"))
    assert extended_node_count(p) == 26
    reader, _ = make_graph()
    ctx, rep, _ = build_causal_context(reader, ALL_ENT, p)
    assert rep.total_allowed <= 8000
    assert {s.name: s.tokens_allowed for s in rep.sections} == {
        "entities": 3200,
        "relationships": 3200,
        "sources": 1600,
    }
    assert any("extended nodes" in n for n in rep.notes)
    assert "-----TextUnits-----" in ctx


def test_structure_and_relevance_truncation():
    paras = [f"Paragraph {i} " + "word " * 30 for i in range(10)]
    text = "\n\n".join(paras)
    out = structure_truncate(text, 150)
    assert out.startswith("Paragraph 0") and out.rstrip().endswith(paras[-1].rstrip())
    assert OMISSION in out and count_tokens(out) <= 150
    paras[6] = "Paragraph 6 mentions the zeppelin quartermaster."
    rel = relevance_truncate("\n\n".join(paras), "zeppelin quartermaster", 80)
    assert "zeppelin" in rel and count_tokens(rel) <= 80


def test_csv_rows_quote_cells_with_line_breaks_so_a_row_reads_back_whole():
    import csv
    import io

    cells = ["c1", "doc-1", "Marley was dead:\nto begin with.\r\nThere is no doubt", 0.123456]
    row = csv_row(cells)
    assert "\n" in row and row.endswith("0.123")
    assert list(csv.reader(io.StringIO(row))) == [["c1", "doc-1", cells[2], "0.123"]]
    assert csv_row(["a", "b c", 2]) == "a,b c,2"  # nothing else is quoted


def test_causal_evidence_split_gives_text_units_the_network_cap_first():
    p = resolve(QueryParam(query="why"))
    reader, _ = make_graph()
    ctx, rep, src = build_causal_context(reader, ALL_ENT, p, [("chunk-3", 1.0)])
    assert rep.total_allowed <= 8000
    assert {s.name: s.tokens_allowed for s in rep.sections}["sources"] >= 3200
    assert src.chunks and "-----TextUnits-----" in ctx and any("evidence split" in n for n in rep.notes)


def test_a_hub_entity_cites_its_first_chunks_and_documents_not_all_of_them():
    from shared.domain.query.context_local import CITED_PER_ROW

    reader, _ = make_graph()
    hub = reader.entity_map["SCROOGE"]
    many = 50_000  # a hub named in most of a large tenant's passages
    reader.entity_map["SCROOGE"] = hub.model_copy(update={
        "source_ids": [f"c{i:05d}" for i in range(many)], "doc_ids": [f"d{i:05d}" for i in range(many)]})
    p = resolve(QueryParam(query="Who is Scrooge's clerk?"))
    _ctx, _rep, src = build_local_context(reader, ALL_ENT, p, [("chunk-3", 1.0)])
    ev = next(e for e in src.evidence if e.key == "SCROOGE")
    assert ev.chunk_ids == [f"c{i:05d}" for i in range(CITED_PER_ROW)]
    assert ev.doc_ids == [f"d{i:05d}" for i in range(CITED_PER_ROW)]
    assert len(src.documents) < 2 * CITED_PER_ROW and "doc-a" in src.documents
    assert len(reader.entity_map["SCROOGE"].doc_ids) == many  # the row keeps them all


def test_sources_list_each_key_and_document_once_in_first_seen_order():
    from shared.domain.query.context_common import Evidence, Sources

    src = Sources()
    src.add(Evidence(kind="entity", cite="E1", key="A", text="", doc_ids=["d2", "d1", "", "d2"]))
    src.add(Evidence(kind="entity", cite="E2", key="A", text="", doc_ids=["d1", "d3"]))
    src.documents.append("d9")  # changed from outside: still read right
    src.add(Evidence(kind="chunk", cite="S1", key="c1", text="", doc_ids=["d9", "d4"]))
    assert src.entities == ["A"] and src.chunks == ["c1"]
    assert src.documents == ["d2", "d1", "d3", "d9", "d4"]
    assert len(src.evidence) == 3
    big = Sources()
    big.add(Evidence(kind="entity", cite="E1", key="H", text="", doc_ids=[f"d{i}" for i in range(200_000)]))
    big.add(Evidence(kind="entity", cite="E2", key="I", text="", doc_ids=[f"d{i}" for i in range(100_000, 300_000)]))
    assert len(big.documents) == 300_000
