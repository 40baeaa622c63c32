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
        if store.unlink_chunk_document(chunk_id, doc_id):
            continue  # the same text is still part of another document
        n, f = store.remove_chunk_fragments(chunk_id)
        names |= n
        fields |= f
        store.delete_chunk(chunk_id)
        removed.append(chunk_id)
    vectors.delete(store.tenant, "chunks", removed)
    store.delete_document(doc_id)
    return {"found": True, "chunks_removed": len(removed), "entities_touched": len(names),
            "relations_touched": len(fields)}
