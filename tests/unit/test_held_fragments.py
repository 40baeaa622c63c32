"""A merged row holds its only fragment and its fragment hash goes (``held_fragments``): what a later merge, a
reused extraction and a removed chunk read is what the hash would have given."""

from __future__ import annotations

from shared.config import get_settings
from shared.domain.models import EntityFragment, ExtractionResult, RelationFragment
from shared.infra.store.redis_extractions import rel_field
from shared.infra.store.redis_graph import GraphStore
from shared.pipeline.merge_stage import run_merge_batch
from tests.unit.graph_support import joined_entity


def _extraction(chunk: str, said: str, doc: str = "doc-1") -> ExtractionResult:
    return ExtractionResult(chunk_id=chunk, entities=[
        EntityFragment(name="SCROOGE", type="person", description=f"Scrooge {said}.", source_id=chunk, doc_id=doc)],
        relations=[RelationFragment(src="MARLEY", tgt="SCROOGE", description=f"Partners {said}.",
                                    keywords="trade, partner", weight=2.5, strength=0.5, source_id=chunk,
                                    doc_id=doc)])


def _merge(store: GraphStore) -> None:
    run_merge_batch(store, store.dirty_members("entities"), store.dirty_members("relations"), get_settings(), None)


def _hashes(store: GraphStore) -> tuple[int, int]:
    r = store.redis
    return r.exists(store.k.entity_fragments("SCROOGE")), r.exists(store.k.relation_fragments("MARLEY", "SCROOGE"))


def test_a_row_merged_from_one_fragment_holds_it_and_its_hash_is_deleted(redis_client, tenant):
    store = GraphStore(redis_client, tenant)
    result = _extraction("c1", "is a miser")
    store.save_extraction(result)
    _merge(store)
    assert _hashes(store) == (0, 0)
    entity = store.entities(["SCROOGE"])["SCROOGE"]
    relation = store.relations([("MARLEY", "SCROOGE")])[("MARLEY", "SCROOGE")]
    assert entity.sole and relation.sole
    assert (entity.description, entity.source_ids, entity.doc_ids) == ("Scrooge is a miser.", ["c1"], ["doc-1"])
    assert (relation.weight, relation.keywords) == (2.5, "partner, trade")
    # the chunk's extraction is read back whole (a re-ingest reuses it), strength and keywords included
    assert store.extraction("c1") == result
    # marked dirty again with nothing new: the row is kept as it is, still holding its fragment
    store.redis.sadd(store.k.dirty("entities"), "SCROOGE")
    _merge(store)
    assert store.entities(["SCROOGE"])["SCROOGE"] == entity


def test_a_second_fragment_puts_the_held_one_back_into_the_hash(redis_client, tenant):
    store = GraphStore(redis_client, tenant)
    first, second = _extraction("c1", "is a miser"), _extraction("c2", "keeps a counting-house", "doc-2")
    store.save_extraction(first)
    _merge(store)
    store.save_extraction(second)
    _merge(store)
    assert redis_client.hlen(store.k.entity_fragments("SCROOGE")) == 2
    assert redis_client.hlen(store.k.relation_fragments("MARLEY", "SCROOGE")) == 2
    entity = store.entities(["SCROOGE"])["SCROOGE"]
    relation = store.relations([("MARLEY", "SCROOGE")])[("MARLEY", "SCROOGE")]
    assert not entity.sole and not relation.sole
    assert entity.source_ids == relation.source_ids == ["c1", "c2"]
    assert relation.weight == 5.0
    assert store.extraction("c1") == first and store.extraction("c2") == second


def test_removing_the_chunk_a_row_holds_removes_what_it_said(redis_client, tenant):
    store = GraphStore(redis_client, tenant)
    store.save_extraction(_extraction("c1", "is a miser"))
    store.save_extraction(_extraction("c2", "keeps a counting-house", "doc-2"))
    _merge(store)
    store.remove_chunk_fragments("c1")
    _merge(store)  # c2's fragment is now the only one: the row holds it
    entity = store.entities(["SCROOGE"])["SCROOGE"]
    assert (entity.source_ids, entity.description) == (["c2"], "Scrooge keeps a counting-house.") and entity.sole
    assert _hashes(store) == (0, 0)
    store.remove_chunk_fragments("c2")
    _merge(store)
    assert store.entities(["SCROOGE"]) == {} and store.relations([("MARLEY", "SCROOGE")]) == {}
    assert store.graph_sizes() == {"entities": 0, "relations": 0}


def test_a_chunk_removed_while_its_held_fragment_is_merged_is_not_written_back(redis_client, tenant):
    store = GraphStore(redis_client, tenant)
    store.save_extraction(_extraction("c1", "is a miser"))
    _merge(store)
    store.save_extraction(_extraction("c2", "keeps a counting-house"))
    calls = []

    def merge(name, frags):
        calls.append(sorted(f.source_id for f in frags))
        if len(calls) == 1:  # between the read and the write, c1 is removed
            store.remove_chunk_fragments("c1")
        return joined_entity(name, frags)

    store.merge_batch("entities", ["SCROOGE"], merge)
    assert calls == [["c1", "c2"], ["c2"]]  # the first merge was refused and done again without c1
    entity = store.entities(["SCROOGE"])["SCROOGE"]
    assert entity.source_ids == ["c2"] and entity.sole


def test_a_row_that_does_not_give_its_fragment_back_keeps_the_hash(redis_client, tenant):
    store = GraphStore(redis_client, tenant)
    store.save_extraction(_extraction("c1", "is a miser"))
    store.merge_batch("entities", ["SCROOGE"], lambda name, frags: joined_entity(name, frags).model_copy(
        update={"description": "SCROOGE, SUMMARISED"}))
    assert redis_client.hlen(store.k.entity_fragments("SCROOGE")) == 1
    assert not store.entities(["SCROOGE"])["SCROOGE"].sole
    assert store.dirty_members("relations") == [rel_field("MARLEY", "SCROOGE")]
