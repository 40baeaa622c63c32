"""Folding new fragments into a stored row (``shared.domain.merge_fold``) against merging every fragment again:
the same chunks, documents, weight and keywords and the same description parts; a fold only when the row's own
fragments are exactly what it was merged from."""

from __future__ import annotations

from shared.config import get_settings
from shared.domain.merge import merge_entity, merge_relation, split_description
from shared.domain.merge_fold import fold_entity, fold_relation, fragments_digest, new_fragments
from shared.domain.models import EntityFragment, ExtractionResult, RelationFragment
from shared.infra.store.redis_graph import GraphStore
from shared.pipeline.merge_stage import run_merge_batch


def _rel(chunk: str, text: str, weight: float = 1.0, keywords: str = "", doc: str = "") -> RelationFragment:
    return RelationFragment(src="MARLEY", tgt="SCROOGE", description=text, keywords=keywords, weight=weight,
                            source_id=chunk, doc_id=doc)


def _ent(chunk: str, text: str, kind: str = "person", doc: str = "") -> EntityFragment:
    return EntityFragment(name="SCROOGE", type=kind, description=text, source_id=chunk, doc_id=doc)


def _stored(row, frags):
    row.merged_of = fragments_digest(frags)
    return row


def test_a_fold_gives_what_merging_every_fragment_gives():
    old = [_rel("c1", "Partners.", 2.0, "business", "d1"), _rel("c2", "Seven years dead.", 0.5, "ghost", "d1")]
    new = [_rel("c3", "Marley warns Scrooge.", 1.5, "ghost, warning", "d2")]
    row = _stored(merge_relation("MARLEY", "SCROOGE", old), old)
    assert new_fragments(row, old + new) == new
    folded, full = fold_relation(row, new), merge_relation("MARLEY", "SCROOGE", old + new)
    assert (folded.weight, folded.keywords, folded.source_ids, folded.doc_ids) == (
        full.weight, full.keywords, full.source_ids, full.doc_ids)
    assert sorted(split_description(folded.description)) == sorted(split_description(full.description))

    ents = [_ent("c1", "A miser.", "person", "d1"), _ent("c2", "A miser.", "person", "d1")]
    erow = _stored(merge_entity("SCROOGE", ents), ents)
    more = [_ent("c3", "Reformed.", "organization", "d2")]
    folded_e, full_e = fold_entity(erow, more), merge_entity("SCROOGE", ents + more)
    assert (folded_e.type, folded_e.source_ids, folded_e.doc_ids) == (full_e.type, full_e.source_ids, full_e.doc_ids)
    assert folded_e.description == full_e.description == "A miser.<SEP>Reformed."


def test_no_fold_when_the_rows_own_fragments_changed_or_it_has_no_digest():
    old = [_rel("c1", "Partners."), _rel("c2", "Seven years dead.")]
    row = _stored(merge_relation("MARLEY", "SCROOGE", old), old)
    assert new_fragments(row, old) == []
    assert new_fragments(row, [old[0], _rel("c3", "New.")]) is None  # c2 removed
    assert new_fragments(row, [old[0], _rel("c2", "Said otherwise."), _rel("c3", "New.")]) is None  # c2 changed
    row.merged_of = ""  # merged before rows kept the digest
    assert new_fragments(row, [*old, _rel("c3", "New.")]) is None
    assert new_fragments(None, old) is None


def test_the_merge_stage_folds_a_later_batch_and_merges_again_after_a_removal(redis_client, tenant):
    store, cfg = GraphStore(redis_client, tenant), get_settings()
    store.save_extraction(ExtractionResult(chunk_id="c1", entities=[_ent("c1", "A miser.")],
                                           relations=[_rel("c1", "Partners.", 2.0)]))
    run_merge_batch(store, store.dirty_members("entities"), store.dirty_members("relations"), cfg, None)
    store.save_extraction(ExtractionResult(chunk_id="c2", entities=[_ent("c2", "Sees a ghost.")],
                                           relations=[_rel("c2", "Marley haunts Scrooge.", 0.5)]))
    unpacked = []
    real = store.merge_batch

    def watching(kind, keys, merge, **kw):  # what the merge function is handed, row by row
        def spy(key, frags, previous=None):
            row = merge(key, frags, previous)
            unpacked.append((key, new_fragments(previous, frags)))
            return row
        return real(kind, keys, spy, **kw)

    store.merge_batch = watching
    run_merge_batch(store, store.dirty_members("entities"), store.dirty_members("relations"), cfg, None)
    assert [len(new) for _key, new in unpacked] == [1, 1]  # folded: one new fragment each
    relation = next(iter(store.relations_of(["SCROOGE"], 10)))
    assert (relation.weight, relation.source_ids) == (2.5, ["c1", "c2"])
    assert split_description(relation.description) == ["Partners.", "Marley haunts Scrooge."]

    store.remove_chunk_fragments("c1")
    unpacked.clear()
    run_merge_batch(store, store.dirty_members("entities"), store.dirty_members("relations"), cfg, None)
    assert [new for _key, new in unpacked] == [None, None]  # merged from every fragment
    relation = next(iter(store.relations_of(["SCROOGE"], 10)))
    assert (relation.weight, relation.source_ids, relation.description) == (0.5, ["c2"], "Marley haunts Scrooge.")
    assert store.entities(["SCROOGE"])["SCROOGE"].description == "Sees a ghost."
