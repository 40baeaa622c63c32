"""A small graph written through the store's own calls (document, chunks, extraction fragments, merge), for the
explorer's text checks: descriptions merged from several passages (``<SEP>``-joined, one part repeated, one
part several paragraphs long; BELLE's single part long too), a PDF-like document with pages, FEZZIWIG with a
single neighbour (a 2-node graph) and BELLE with none (a 1-node graph)."""

from __future__ import annotations

from shared.domain.merge import merge_entity, merge_relation
from shared.domain.models import Chunk, Document, EntityFragment, ExtractionResult, RelationFragment
from shared.infra.store.redis_graph import GraphStore, rel_field

DOC_ID, FILE_NAME = "ledger-1", "fezziwig-ledger.pdf"
LONG_PART = ("Fezziwig kept a warehouse where young Scrooge was apprenticed. " * 4 + "\n\n" +
             "Every Christmas Eve he closed the shop early and threw a ball for his clerks. " * 4 + "\n\n" +
             "He spent little on it, yet made everyone happy, which Scrooge remembers with regret. " * 3)
BELLE = "The woman Scrooge once meant to marry.\n\n" + "She released him, seeing he loved gold more than her. " * 8
FRAGMENTS = {  # chunk id -> (pages, entity descriptions, relation descriptions)
    "chunk-ledger-1": ([2], {"FEZZIWIG": "A jovial merchant.", "DICK WILKINS": "Scrooge's fellow apprentice.",
                             "BELLE": BELLE},
                       {("FEZZIWIG", "DICK WILKINS"): "Dick is Fezziwig's apprentice."}),
    "chunk-ledger-2": ([3, 4], {"FEZZIWIG": f"Scrooge's old master.<SEP>A jovial merchant.<SEP>{LONG_PART}"},
                       {("FEZZIWIG", "DICK WILKINS"): "Fezziwig is kind to Dick.<SEP>Dick is Fezziwig's apprentice."}),
}


def seed_explorer_graph(redis, tenant: str) -> None:
    store = GraphStore(redis, tenant)
    chunk_ids = list(FRAGMENTS)
    store.put_document(Document(id=DOC_ID, tenant=tenant, title="Fezziwig's ledger", status="processed",
                                metadata={"filename": FILE_NAME}, chunk_ids=chunk_ids), "the ledger's text")
    store.put_chunks([Chunk(id=cid, doc_id=DOC_ID, index=i, text=f"passage {i}", tokens=3, pages=pages)
                      for i, (cid, (pages, _e, _r)) in enumerate(FRAGMENTS.items())])
    for cid, (_pages, entities, relations) in FRAGMENTS.items():
        store.save_extraction(ExtractionResult(
            chunk_id=cid,
            entities=[EntityFragment(name=n, type="person", description=d, source_id=cid, doc_id=DOC_ID)
                      for n, d in entities.items()],
            relations=[RelationFragment(src=a, tgt=b, description=d, source_id=cid, doc_id=DOC_ID)
                       for (a, b), d in relations.items()]))
    for name in ("FEZZIWIG", "DICK WILKINS", "BELLE"):
        store.merge_entity(name, merge_entity)
    store.merge_relation(rel_field("FEZZIWIG", "DICK WILKINS"), merge_relation)
    store.set_degrees({"FEZZIWIG": 1, "DICK WILKINS": 1, "BELLE": 0})
