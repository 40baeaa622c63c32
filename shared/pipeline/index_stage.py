"""Embed dirty entities and new chunks into the vector store (batches embedded concurrently), all with the
tenant's recorded embedder: a tenant whose vectors are another embedder's is re-embedded whole first
(``shared.pipeline.reembed``)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from shared.domain.storage import VectorItem, VectorStore
from shared.domain.tokens import truncate_text
from shared.infra.llm.embedding import Embedder
from shared.infra.llm.usage import CallContext
from shared.infra.store.redis_graph import GraphStore
from shared.pipeline.reembed import prepare, settle


def entity_text(name: str, description: str) -> str:
    return f"{name}: {description}"


def _entity_batch(store: GraphStore, vectors: VectorStore, embedder: Embedder, ctx, group: list[str]) -> int:
    present = store.entities(group)
    vectors.delete(store.tenant, "entities", [n for n in group if n not in present])
    items = list(present.values())
    if items:
        vecs = embedder.embed([truncate_text(entity_text(e.name, e.description), 2000) for e in items], ctx)
        vectors.upsert(store.tenant, "entities", [
            VectorItem(e.name, v, {"name": e.name, "type": e.type}) for e, v in zip(items, vecs, strict=True)])
    store.clear_dirty("embed_entities", group)
    return len(items)


def _chunk_batch(store: GraphStore, vectors: VectorStore, embedder: Embedder, ctx, group: list[str]) -> int:
    chunks = store.chunks(group)
    vectors.delete(store.tenant, "chunks", [c for c in group if c not in chunks])
    items = list(chunks.values())
    if items:
        vecs = embedder.embed([c.text for c in items], ctx)
        vectors.upsert(store.tenant, "chunks", [
            VectorItem(c.id, v, {"doc_id": c.doc_id}) for c, v in zip(items, vecs, strict=True)])
    store.clear_dirty("embed_chunks", group)
    return len(items)


def run_index(store: GraphStore, vectors: VectorStore, embedder: Embedder, ctx: CallContext, batch: int = 64,
              parallel: int = 8) -> dict:
    """Idempotent: a batch leaves the dirty set only after its vectors are stored. ``reembedded``: this stage
    embedded the whole tenant again (its embedder changed)."""
    reembedded = prepare(store, vectors, embedder, ctx)
    names = store.dirty_members("embed_entities")
    chunk_ids = store.dirty_members("embed_chunks")
    with ThreadPoolExecutor(max_workers=parallel) as pool:
        ent = [pool.submit(_entity_batch, store, vectors, embedder, ctx, names[i : i + batch])
               for i in range(0, len(names), batch)]
        chk = [pool.submit(_chunk_batch, store, vectors, embedder, ctx, chunk_ids[i : i + batch])
               for i in range(0, len(chunk_ids), batch)]
        done = {"entities": sum(f.result() for f in ent), "chunks": sum(f.result() for f in chk)}
    settle(store, vectors, embedder, reembedded, done["entities"] + done["chunks"])
    return {**done, "reembedded": reembedded}
