"""The compact stored forms of fragments and extraction records (``graph_codec``): what is written reads back as it
was, and records written in the older, complete JSON form still read, merge and delete."""

from __future__ import annotations

from shared.domain.merge import merge_entity, merge_relation
from shared.domain.models import EntityFragment, ExtractionResult, RelationFragment
from shared.infra.store.graph_codec import pack_extraction, unpack_extraction
from shared.infra.store.redis_graph import GraphStore


def _result(cid: str = "chunk-1") -> ExtractionResult:
    return ExtractionResult(chunk_id=cid, warnings=["w1"], entities=[
        EntityFragment(name="A", type="person", description="A is here.", source_id=cid, doc_id="doc-1"),
        EntityFragment(name="B", source_id=cid),
        EntityFragment(name="C", type="place", description="Ç, ünïcode — “quoted”", source_id=cid, doc_id="doc-1"),
    ], relations=[
        RelationFragment(src="A", tgt="B", description="A met B.", keywords="co-occurrence", weight=2.0,
                         strength=3.5, source_id=cid, doc_id="doc-1"),
        RelationFragment(src="B", tgt="Z", source_id=cid),  # an endpoint that is not one of the chunk's entities
    ])


def test_an_extraction_reads_back_as_written(redis_client, tenant):
    store = GraphStore(redis_client, tenant)
    result = _result()
    store.save_extraction(result)
    assert store.extraction("chunk-1") == result
    assert store.chunk_and_extraction("chunk-1")[1] == result
    assert store.dirty_members("relations") == ["A\x1fB", "B\x1fZ"]


def test_reversed_endpoints_are_filed_and_read_as_the_sorted_pair(redis_client, tenant):
    store = GraphStore(redis_client, tenant)
    store.save_extraction(ExtractionResult(chunk_id="c1", relations=[
        RelationFragment(src="Y", tgt="X", description="y-x", source_id="c1")]))
    (frag,) = store.extraction("c1").relations
    assert (frag.src, frag.tgt, frag.description) == ("X", "Y", "y-x")
    assert merge_relation("Y", "X", [frag]) == merge_relation("Y", "X", [
        RelationFragment(src="Y", tgt="X", description="y-x", source_id="c1")])


def test_a_missing_fragment_makes_the_extraction_absent_so_it_is_made_again(redis_client, tenant):
    store = GraphStore(redis_client, tenant)
    store.save_extraction(_result())
    redis_client.hdel(store.k.entity_fragments("B"), "chunk-1")
    assert store.extraction("chunk-1") is None
    assert store.extracted(["chunk-1"]) == {"chunk-1"}  # the record is there: deletion still finds every fragment
    assert store.remove_chunk_fragments("chunk-1") == ({"A", "B", "C"}, {"A\x1fB", "B\x1fZ"})


def test_records_written_in_the_complete_json_form_still_read_merge_and_delete(redis_client, tenant):
    store = GraphStore(redis_client, tenant)
    result = _result()
    for frag in result.entities:
        redis_client.hset(store.k.entity_fragments(frag.name), result.chunk_id, frag.model_dump_json())
    for frag in result.relations:
        redis_client.hset(store.k.relation_fragments(*sorted((frag.src, frag.tgt))), result.chunk_id,
                          frag.model_dump_json())
    redis_client.set(store.k.extraction(result.chunk_id), result.model_dump_json())
    store.save_extraction(ExtractionResult(chunk_id="chunk-2", entities=[
        EntityFragment(name="A", description="A again.", source_id="chunk-2")]))
    assert store.extraction("chunk-1") == result
    assert store.merge_entity("A", merge_entity)
    assert store.entities(["A"])["A"].source_ids == ["chunk-1", "chunk-2"]
    assert store.remove_chunk_fragments("chunk-1") == ({"A", "B", "C"}, {"A\x1fB", "B\x1fZ"})
    assert store.merge_entity("A", merge_entity)
    assert store.entities(["A"])["A"].source_ids == ["chunk-2"]
    assert not redis_client.exists(store.k.entity_fragments("B"), store.k.extraction("chunk-1"))


def test_an_extraction_record_holds_names_once_and_pairs_as_indexes():
    raw = pack_extraction(["A", "B"], [("A", "B"), ("B", "Z")], [])
    assert raw == b'{"n":["A","B","Z"],"e":2,"r":[0,1,1,2]}'
    index = unpack_extraction(raw)
    assert (index.names, index.pairs, index.warnings, index.result) == (["A", "B"], [("A", "B"), ("B", "Z")], [], None)


def test_communities_and_reports_read_back_as_written_and_older_json_still_reads(redis_client, tenant):
    from shared.domain.models import Community, CommunityReport, Finding
    from shared.domain.report_text import render_markdown

    store = GraphStore(redis_client, tenant)
    inner = Community(id="L0-0", level=0, nodes=["A", "B", "C"], edges=[("A", "B"), ("C", "B")], parent="L1-0",
                      occurrence=0.5, signature="s0", chunk_ids=["c1"])
    outer = Community(id="L1-0", level=1, nodes=["A"], edges=[("A", "Z")], children=["L0-0"])  # Z: not a member
    store.replace_communities([inner, outer], {0: 1, 1: 1}, 1)
    findings = [Finding(summary="f1", explanation="why"), Finding(summary="f2")]
    rendered = CommunityReport(community_id="L0-0", level=0, title="T", summary="S", findings=findings,
                               signature="s0", full_text=render_markdown("T", "S", findings))
    own = CommunityReport(community_id="L1-0", level=1, title="U", summary="V", full_text="written apart")
    store.save_reports([rendered, own])
    communities, reports = store.community_rows()
    assert communities["L0-0"] == inner.model_copy(update={"chunk_ids": []})  # chunk ids: only for occurrence
    assert communities["L1-0"] == outer
    assert reports == {"L0-0": rendered, "L1-0": own}
    assert store.cached_reports(["s0"]) == {"s0": rendered}
    redis_client.hset(store.k.reports(), "L0-0", rendered.model_dump_json())  # the older, whole JSON
    redis_client.hset(store.k.communities(), "L0-0", inner.model_dump_json())
    assert store.reports_by_ids(["L0-0"])["L0-0"] == rendered
    assert store.communities_by_ids(["L0-0"])["L0-0"] == inner


def test_texts_and_chunk_rows_are_stored_deflated_and_read_back_either_way(redis_client, tenant):
    from shared.domain.models import Chunk, Document
    from shared.infra.redis.text_codec import MARK, pack_text, unpack_text

    store = GraphStore(redis_client, tenant)
    text = "Marley was dead: to begin with. Ünïcode “quotes”. " * 40
    store.put_document(Document(id="d1", tenant=tenant), text)
    assert store.document_text("d1") == text
    assert redis_client.get(store.k.doc_text("d1")).startswith(MARK)
    chunk = Chunk(id="chunk-1", doc_id="d1", index=0, text=text, tokens=400, start=0, end=len(text))
    store.put_chunks([chunk])
    assert store.chunk("chunk-1") == chunk == store.chunks(["chunk-1"])["chunk-1"]
    assert store.chunk_and_extraction("chunk-1") == (chunk, None)
    redis_client.set(store.k.doc_text("d1"), "plain, as written before")
    redis_client.set(store.k.chunk("chunk-1"), chunk.model_dump_json())
    assert store.document_text("d1") == "plain, as written before"
    assert store.chunk("chunk-1") == chunk
    for odd in ("", "short", "\x00z starts like a deflated value", "\x00z" + "x" * 1000):
        assert unpack_text(pack_text(odd)) == odd


def test_long_fragments_and_rows_are_stored_deflated_and_merge_as_before(redis_client, tenant):
    from shared.infra.redis.text_codec import MARK

    store = GraphStore(redis_client, tenant)
    long = "Scrooge closed the window, and examined the door by which the Ghost had entered. " * 3
    result = ExtractionResult(chunk_id="c1", entities=[
        EntityFragment(name="GHOST", type="person", description=long, source_id="c1", doc_id="doc-1")],
        relations=[RelationFragment(src="SCROOGE", tgt="GHOST", description=long, source_id="c1", doc_id="doc-1")])
    store.save_extraction(result)
    assert redis_client.hget(store.k.entity_fragments("GHOST"), "c1").startswith(MARK)
    assert store.extraction("c1").entities == result.entities
    assert store.merge_entity("GHOST", merge_entity) and store.merge_relation("GHOST\x1fSCROOGE", merge_relation)
    assert redis_client.hget(store.k.entities(), "GHOST").startswith(MARK)
    assert store.entities(["GHOST"])["GHOST"] == merge_entity("GHOST", result.entities)
    assert store.all_relations()[("GHOST", "SCROOGE")] == merge_relation("GHOST", "SCROOGE", result.relations)


def test_a_report_is_stored_once_under_its_signature_and_each_community_refers_to_it(redis_client, tenant):
    from shared.domain.models import CommunityReport

    store = GraphStore(redis_client, tenant)
    low = CommunityReport(community_id="L0-3", level=0, title="T", summary="S" * 300, signature="sig")
    high = low.model_copy(update={"community_id": "L1-1", "level": 1})  # the same members one level up
    fallback = CommunityReport(community_id="L0-4", level=0, title="F", summary="no signature")
    store.save_reports([low, high, fallback])
    assert redis_client.hlen(store.k.report_cache()) == 1
    assert redis_client.hget(store.k.reports(), "L1-1") == b"@1@sig"
    assert store.reports() == {"L0-3": low, "L1-1": high, "L0-4": fallback}
    assert store.reports_by_ids(["L1-1", "L0-4", "L9-9"]) == {"L1-1": high, "L0-4": fallback}
    redis_client.hdel(store.k.report_cache(), "sig")  # a dangling reference: no report, so one is made again
    assert store.reports_by_ids(["L0-3"]) == {}


def test_the_report_cache_keeps_only_the_signatures_in_use(redis_client, tenant):
    from shared.domain.models import Community, CommunityReport

    store = GraphStore(redis_client, tenant)

    def clustering(*sigs: str) -> list[Community]:
        return [Community(id=f"L0-{i}", level=0, nodes=[f"N{i}"], signature=s) for i, s in enumerate(sigs)]

    def report(cid: str, sig: str) -> CommunityReport:
        return CommunityReport(community_id=cid, level=0, title=sig, summary="s", signature=sig)

    store.replace_communities(clustering("a", "b", "c"), {0: 3}, 1)
    store.save_reports([report("L0-0", "a"), report("L0-1", "b"), report("L0-2", "c")])
    store.prune_reports()
    assert {k.decode() for k in redis_client.hkeys(store.k.report_cache())} == {"a", "b", "c"}
    # The next clustering: "a" unchanged (moved to another id), "b" and "c" gone, "d" new. Before its reports are
    # written, the cache keeps "a" (a current signature, reused) and the entries the old reports still refer to.
    store.replace_communities(clustering("d", "a"), {0: 2}, 2)
    assert store.prune_report_cache() == 0
    assert store.cached_reports(["a"])["a"].title == "a"
    store.save_reports([report("L0-0", "d"), store.cached_reports(["a"])["a"].model_copy(
        update={"community_id": "L0-1"})])
    store.prune_reports()
    assert {k.decode() for k in redis_client.hkeys(store.k.report_cache())} == {"a", "d"}
    assert {c: r.title for c, r in store.reports().items()} == {"L0-0": "d", "L0-1": "a"}
    assert store.prune_report_cache() == 0  # idempotent: a retried step deletes nothing more
    store.replace_communities([], {}, 3)
    store.prune_reports()
    assert redis_client.hlen(store.k.report_cache()) == 0
