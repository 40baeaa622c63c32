"""The compact stored form of merged rows (``row_codec``): every row reads back as written (but for the degree,
which is the degrees hash's), in the field it is filed under; rows written before (JSON objects) are still read,
by the codec and by every ``GraphStore`` reader."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from shared.domain.ids import chunk_id_for, doc_id_for
from shared.domain.merge import merge_entity
from shared.domain.models import Entity, EntityFragment, Relation
from shared.infra.redis.text_codec import MARK, pack_text, unpack_bytes
from shared.infra.store.merge_write import row_json
from shared.infra.store.redis_extractions import rel_field
from shared.infra.store.redis_graph import GraphStore
from shared.infra.store.row_codec import layout, pack_row, row_field, unpack_row

CHUNK = "chunk-cece2568e193b583cda3d0b24fa151de"
DOC = "doc-c3e67d9f5b1cf09c5a0e54e06d28bd01"

_hex_ids = st.binary(min_size=16, max_size=16).map(bytes.hex)
_free = st.text(max_size=30)
_ids = st.one_of(_hex_ids.map("chunk-".__add__), _hex_ids.map("doc-".__add__), _free, _free.map("~".__add__),
                 _hex_ids.map(lambda h: "~" + h[:22]), st.sampled_from(["c1", "doc1", "", "~", "~~", "chunk-1"]),
                 _hex_ids.map(lambda h: "chunk-" + h.upper()), _hex_ids.map(lambda h: "chunk-" + h + "\n"))
_id_lists = st.lists(_ids, max_size=5)
_counts = st.dictionaries(st.text(max_size=12), st.integers(-(2**70), 2**70), max_size=3)
_ints = st.integers(-(2**63), 2**63)
_names = st.text(min_size=0, max_size=20).filter(lambda s: "\x1f" not in s)

entities = st.builds(
    Entity, name=_names, type=st.sampled_from(["unknown", "person", "", "ünï"]), description=st.text(max_size=200),
    source_ids=_id_lists, doc_ids=_id_lists, summarized=st.booleans(), text_tokens=_counts, row_tokens=_counts,
    row_digest=_ints, summary_of=st.text(max_size=16), merged_of=st.text(max_size=16), sole=st.text(max_size=40))
relations = st.builds(
    Relation, src=_names, tgt=_names, description=st.text(max_size=200), keywords=st.text(max_size=30),
    weight=st.floats(allow_nan=False, allow_infinity=False) | st.just(1.0), source_ids=_id_lists, doc_ids=_id_lists,
    rank=_ints, text_tokens=_counts, row_tokens=_counts, row_digest=_ints, summary_of=st.text(max_size=16),
    merged_of=st.text(max_size=16), sole=st.text(max_size=40))


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(entities)
def test_every_entity_row_reads_back_as_written(row):
    stored = pack_row(row)
    assert unpack_bytes(stored).startswith(b"[")
    assert unpack_row(Entity, stored, row.name) == row
    for field in ("description", "source_ids", "doc_ids", "summarized", "sole"):  # one field, no model built
        assert row_field(Entity, stored, row.name, field) == getattr(row, field)
    if not stored.startswith(MARK):  # a client that decodes responses hands over str
        assert unpack_row(Entity, stored.decode(), row.name) == row


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(relations)
def test_every_relation_row_reads_back_as_written_under_its_field(row):
    """The sorted pair (a merge's) is named by the field; endpoints in the other order are stored whole."""
    stored = pack_row(row)
    assert unpack_bytes(stored).startswith(b"[" if row.src <= row.tgt else b"{")
    assert unpack_row(Relation, stored, rel_field(row.src, row.tgt)) == row


def test_ids_of_both_forms_and_ids_that_start_with_the_mark_round_trip():
    ids = [CHUNK, DOC, "c1", "doc1", "", "~", "~~", "~x", "~zs4laOGTtYPNo9CyT6FR3g", "chunk-" + "A" * 32, "ünï"]
    row = Entity(name="A", source_ids=ids, doc_ids=ids)
    assert unpack_row(Entity, pack_row(row), "A") == row
    stored = unpack_bytes(pack_row(Entity(name="A", source_ids=[CHUNK], doc_ids=[DOC])))
    assert CHUNK.encode() not in stored and DOC.encode() not in stored
    assert stored == b'["unknown","",["~zs4laOGTtYPNo9CyT6FR3g"],["~w-Z9n1sc8JxaDlTgbSi9AQ"]]'


def test_defaults_are_trimmed_from_the_end_and_the_degree_is_not_stored():
    assert pack_row(Entity(name="A")) == b"[]" and pack_row(Relation(src="A", tgt="B")) == b"[]"
    assert pack_row(Entity(name="A", degree=7)) == b"[]"
    assert unpack_row(Entity, b"[]", "A") == Entity(name="A")
    assert unpack_row(Relation, b"[]", "A\x1fB") == Relation(src="A", tgt="B")
    assert pack_row(Entity(name="A", summarized=True)) == b'["unknown","",[],[],1]'
    assert unpack_row(Entity, b'["unknown","",[],[],1]', "A").summarized is True
    assert pack_row(Relation(src="A", tgt="B", weight=0.1)) == b'["","",0.1]'


def test_fields_keep_their_positions():
    """Stored rows are positional: a new field goes after these (a row written before reads its default)."""
    assert layout(Entity).names[:11] == ("type", "description", "source_ids", "doc_ids", "summarized", "text_tokens",
                                         "row_tokens", "row_digest", "summary_of", "merged_of", "sole")
    assert layout(Relation).names[:12] == ("description", "keywords", "weight", "source_ids", "doc_ids", "rank",
                                           "text_tokens", "row_tokens", "row_digest", "summary_of", "merged_of", "sole")


def _example() -> Relation:
    return Relation(
        src="CALIFORNIA", tgt="LEE TIMBERLAKE", keywords="co-occurrence", source_ids=[CHUNK], doc_ids=[DOC],
        description="Timberlake moved to the state in the spring of 1945, after the war, and lived there from 1945 "
                    "until his death, running the family's timber holdings along the northern coast and later "
                    "funding the state's first school of forestry.", row_tokens={"o200k_base": 49},
        row_digest=2085302629, merged_of="b7364a2befd6e007")


def test_a_relation_row_no_longer_stores_its_endpoints_and_is_smaller():
    row = _example()
    old = pack_text(row.model_dump_json(exclude_defaults=True))
    new = pack_row(row)
    assert b"LEE TIMBERLAKE" not in unpack_bytes(new) and b"CALIFORNIA" not in unpack_bytes(new)
    assert len(new) < len(old) and row_json(row) == new
    assert unpack_row(Relation, new, "CALIFORNIA\x1fLEE TIMBERLAKE") == row


def test_rows_written_before_as_json_objects_are_still_read():
    rel = _example()
    ent = Entity(name="ü", type="person", description="x", source_ids=["c1"], doc_ids=["doc1"], summarized=True)
    for old in (rel.model_dump_json(), rel.model_dump_json(exclude_defaults=True),
                pack_text(rel.model_dump_json(exclude_defaults=True))):
        assert unpack_row(Relation, old, "CALIFORNIA\x1fLEE TIMBERLAKE") == rel
    assert unpack_row(Entity, ent.model_dump_json(exclude_defaults=True), "ü") == ent
    assert unpack_row(Entity, ent.model_dump_json().encode(), "ü") == ent
    assert row_field(Entity, ent.model_dump_json().encode(), "ü", "source_ids") == ["c1"]


def test_every_store_reader_reads_both_forms(redis_client, tenant):
    store = GraphStore(redis_client, tenant)
    cid, doc = chunk_id_for("one"), doc_id_for("one")
    new = Entity(name="NEW", type="person", description="written now", source_ids=[cid, "c1"], doc_ids=[doc])
    old = Entity(name="OLD", type="org", description="written before", source_ids=["c2"], doc_ids=["doc1"])
    rel_new, rel_old = Relation(src="NEW", tgt="OLD", weight=2.5, source_ids=[cid]), _example()
    redis_client.hset(store.k.entities(), mapping={"NEW": row_json(new), "OLD": old.model_dump_json()})
    redis_client.hset(store.k.relations(), mapping={rel_field("NEW", "OLD"): row_json(rel_new),
                                                    rel_field(rel_old.src, rel_old.tgt): rel_old.model_dump_json()})
    redis_client.hset(store.k.degrees(), mapping={"NEW": 1, "OLD": 3})
    store._bump(redis_client)
    assert redis_client.hget(store.k.entities(), "NEW").startswith(b"[")
    expected = {"NEW": new.model_copy(update={"degree": 1}), "OLD": old.model_copy(update={"degree": 3})}
    assert store.entities(["NEW", "OLD", "NONE"]) == expected == store.all_entities()
    pairs = {("NEW", "OLD"): rel_new, ("CALIFORNIA", "LEE TIMBERLAKE"): rel_old}
    assert store.relations(pairs) == pairs == store.all_relations()
    seen = {}

    def merge(name, frags, previous=None):
        seen[name] = previous
        return merge_entity(name, frags)

    frag = EntityFragment(name="OLD", type="org", description="written before", source_id="c2", doc_id="doc1")
    redis_client.hset(store.k.entity_fragments("OLD"), "c2", frag.model_dump_json())
    redis_client.hset(store.k.entity_fragments("NEW"), "c1", frag.model_copy(update={"name": "NEW"}).model_dump_json())
    assert store.merge_batch("entities", ["NEW", "OLD"], merge, previous=True) == (2, 0)
    assert seen == {"NEW": new, "OLD": old}
    assert redis_client.hget(store.k.entities(), "OLD").startswith(b"[")  # rewritten in the compact form
