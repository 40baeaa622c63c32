"""Remove a document and everything only it contributed (chunks, vectors, fragments).

Entities and relations it touched are marked dirty, so the ordinary merge stage recomputes them
from the fragments that remain (an entity left with none disappears), and the cluster/report stages
regenerate only communities whose content changed.
"""

from __future__ import annotations

from shared.domain.storage import VectorStore
from shared.infra.store.redis_graph import GraphStore


def run_delete(store: GraphStore, vectors: VectorStore, doc_id: str) -> dict:
    """Idempotent: re-running after a crash finishes the removal; a missing document is a no-op."""
    doc = store.document(doc_id)
    if doc is None:
        return {"found": False, "chunks_removed": 0, "entities_touched": 0, "relations_touched": 0}
    removed, names, fields = [], set(), set()
    for chunk_id in doc.chunk_ids:
        store.redis.srem(store.k.chunk_docs(chunk_id), doc_id)
        if store.redis.scard(store.k.chunk_docs(chunk_id)):
            continue  # the same text is still part of another document
        n, f = store.remove_chunk_fragments(chunk_id)
        names |= n
        fields |= f
        pipe = store.redis.pipeline()
        pipe.delete(store.k.chunk(chunk_id), store.k.chunk_docs(chunk_id))
        pipe.srem(store.k.chunks(), chunk_id)
        pipe.srem(store.k.dirty("embed_chunks"), chunk_id)
        pipe.execute()
        removed.append(chunk_id)
    vectors.delete(store.tenant, "chunks", removed)
    pipe = store.redis.pipeline()
    pipe.delete(store.k.doc(doc_id), store.k.doc_text(doc_id))
    pipe.zrem(store.k.docs(), doc_id)
    pipe.execute()
    return {"found": True, "chunks_removed": len(removed), "entities_touched": len(names),
            "relations_touched": len(fields)}
