"""The compact fragment hash fields and doc ids (``graph_codec.fragment_field``, ``pack_doc_id``): both id forms
read back as written, a free-form id never meets a standard one, and hashes written before (fields that are the
chunk id as written, doc ids in full) still merge, read back per chunk and are removed with their chunk."""

from __future__ import annotations

from shared.domain.ids import chunk_id_for, doc_id_for
from shared.domain.merge import merge_entity, merge_relation
from shared.domain.models import EntityFragment, ExtractionResult, RelationFragment
from shared.infra.store.graph_codec import (
    field_chunk,
    fragment_field,
    legacy_field,
    pack_doc_id,
    pack_entity_fragment,
    pack_extraction,
    unpack_doc_id,
    unpack_entity_fragment,
)
from shared.infra.store.redis_graph import GraphStore

STANDARD = chunk_id_for("a chunk")
LOOKALIKE = "abcdefghijklmnop"  # 16 bytes: the raw form of the standard id below
LOOKALIKE_STANDARD = "chunk-" + LOOKALIKE.encode().hex()


def test_chunk_ids_of_both_forms_round_trip_and_never_share_a_field():
    assert fragment_field(STANDARD) == bytes.fromhex(STANDARD[6:]) and len(fragment_field(STANDARD)) == 16
    ids = [STANDARD, LOOKALIKE_STANDARD, LOOKALIKE, "c1", "chunk-1", "", "ünïcode-16-bytes", "\x00" * 15,
           "\x00" + "x" * 16, "\x00" + "x" * 40, "chunk-" + "A" * 32, "chunk-" + "a" * 31, "x" * 100]
    fields = [fragment_field(cid) for cid in ids]
    assert [field_chunk(f) for f in fields] == ids
    assert len(set(fields)) == len(ids)
    assert fragment_field(LOOKALIKE) == b"\x00" + LOOKALIKE.encode() != fragment_field(LOOKALIKE_STANDARD)
    assert fragment_field("c1") == b"c1"  # other free-form ids as written
    assert fragment_field("chunk-" + "A" * 32) == ("chunk-" + "A" * 32).encode()  # upper case: free-form
    assert field_chunk(STANDARD.encode()) == STANDARD  # the field written before the compact form
    assert legacy_field(STANDARD) == STANDARD.encode() and legacy_field("c1") is None


def test_doc_ids_round_trip_and_the_standard_form_is_compact():
    doc = doc_id_for("a document")
    assert len(pack_doc_id(doc)) == 23 and pack_doc_id(doc).startswith("~")
    for doc_id in (doc, "", "doc-1", "d1", "~", "~x", "~~", "~" + pack_doc_id(doc), "doc-" + "A" * 32, "ünï"):
        assert unpack_doc_id(pack_doc_id(doc_id)) == doc_id
    assert pack_doc_id("doc-1") == "doc-1" and pack_doc_id("~x") == "~~x"
    frag = EntityFragment(name="A", type="person", description="A.", source_id=STANDARD, doc_id=doc)
    raw = pack_entity_fragment(frag, STANDARD)
    assert raw == pack_entity_fragment(frag, STANDARD)  # deterministic
    assert doc.encode() not in raw and unpack_entity_fragment(raw, "A", STANDARD) == frag
    old = f'["person","A.","{doc}"]'.encode()  # a value written before: the doc id in full
    assert unpack_entity_fragment(old, "A", STANDARD) == frag


def _extraction(cid: str, doc_id: str, text: str) -> ExtractionResult:
    return ExtractionResult(chunk_id=cid, entities=[
        EntityFragment(name="A", type="person", description=f"A {text}.", source_id=cid, doc_id=doc_id),
        EntityFragment(name="B", description=f"B {text}.", source_id=cid, doc_id=doc_id),
    ], relations=[RelationFragment(src="A", tgt="B", description=f"A and B {text}.", weight=2.0, source_id=cid,
                                   doc_id=doc_id)])


def test_a_free_form_16_byte_id_and_its_standard_lookalike_stay_two_chunks(redis_client, tenant):
    store = GraphStore(redis_client, tenant)
    store.save_extraction(_extraction(LOOKALIKE, "d1", "free"))
    store.save_extraction(_extraction(LOOKALIKE_STANDARD, doc_id_for("x"), "standard"))
    assert redis_client.hlen(store.k.entity_fragments("A")) == 2
    assert store.merge_entity("A", merge_entity)
    assert store.entities(["A"])["A"].source_ids == sorted([LOOKALIKE, LOOKALIKE_STANDARD])
    assert store.extraction(LOOKALIKE) == _extraction(LOOKALIKE, "d1", "free")
    assert store.remove_chunk_fragments(LOOKALIKE) == ({"A", "B"}, {"A\x1fB"})
    assert store.extraction(LOOKALIKE_STANDARD) == _extraction(LOOKALIKE_STANDARD, doc_id_for("x"), "standard")
    assert store.merge_batch("entities", ["A"], merge_entity) == (1, 0)
    assert store.entities(["A"])["A"].source_ids == [LOOKALIKE_STANDARD]


def _write_old_form(redis_client, store: GraphStore, result: ExtractionResult) -> None:
    """What the code before the compact forms wrote: the chunk id as the field, the doc id in full."""
    cid = result.chunk_id
    for frag in result.entities:
        value = [frag.type, frag.description, frag.doc_id]
        redis_client.hset(store.k.entity_fragments(frag.name), cid, _json(value))
    for frag in result.relations:
        value = [frag.description, frag.keywords, frag.weight, frag.strength, frag.doc_id]
        redis_client.hset(store.k.relation_fragments(*sorted((frag.src, frag.tgt))), cid, _json(value))
    names = [f.name for f in result.entities]
    redis_client.set(store.k.extraction(cid), pack_extraction(names, [("A", "B")], []))


def _json(value: list) -> bytes:
    import json

    return json.dumps(value, separators=(",", ":")).encode()


def test_hashes_written_before_merge_read_back_rewrite_and_remove(redis_client, tenant):
    store = GraphStore(redis_client, tenant)
    old, kept, new = chunk_id_for("old"), chunk_id_for("kept"), chunk_id_for("new")
    old_doc, new_doc = doc_id_for("old doc"), doc_id_for("new doc")
    _write_old_form(redis_client, store, _extraction(old, old_doc, "old"))
    _write_old_form(redis_client, store, _extraction(kept, old_doc, "kept"))
    store.save_extraction(_extraction(new, new_doc, "new"))
    key = store.k.entity_fragments("A")
    assert set(redis_client.hkeys(key)) == {old.encode(), kept.encode(), fragment_field(new)}  # both forms

    assert store.merge_entity("A", merge_entity) and store.merge_relation("A\x1fB", merge_relation)
    entity = store.entities(["A"])["A"]
    assert entity.source_ids == sorted([old, kept, new]) and entity.doc_ids == sorted([old_doc, new_doc])
    assert entity == merge_entity("A", [f for c, d in ((old, old_doc), (kept, old_doc), (new, new_doc))
                                        for f in _extraction(c, d, {old: "old", kept: "kept", new: "new"}[c]).entities
                                        if f.name == "A"])
    merge_pair = lambda f, frags: merge_relation(*f.split("\x1f"), frags)  # noqa: E731
    assert store.merge_batch("relations", ["A\x1fB"], merge_pair) == (1, 0)
    assert store.all_relations()[("A", "B")].source_ids == sorted([old, kept, new])

    assert store.extraction(old) == _extraction(old, old_doc, "old")  # read back per chunk from the old fields
    store.save_extraction(store.extraction(kept))  # extracted again: filed under the compact field only
    assert set(redis_client.hkeys(key)) == {old.encode(), fragment_field(kept), fragment_field(new)}
    assert not redis_client.hexists(store.k.relation_fragments("A", "B"), kept)
    assert store.extraction(kept) == _extraction(kept, old_doc, "kept")

    assert store.remove_chunk_fragments(old) == ({"A", "B"}, {"A\x1fB"})  # its fragments in the old form
    assert store.remove_chunk_fragments(kept) == ({"A", "B"}, {"A\x1fB"})  # ... and in the new one
    assert set(redis_client.hkeys(key)) == {fragment_field(new)}
    assert store.merge_batch("entities", ["A", "B"], merge_entity) == (2, 0)
    assert store.entities(["A"])["A"].source_ids == [new] and store.entities(["A"])["A"].doc_ids == [new_doc]
    assert store.remove_chunk_fragments(new) == ({"A", "B"}, {"A\x1fB"})
    assert not redis_client.exists(key, store.k.relation_fragments("A", "B"))
