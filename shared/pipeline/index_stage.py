"""Embed dirty entities and new chunks into the vector store (batches embedded concurrently), all with the
tenant's recorded embedder: a tenant whose vectors are another embedder's is re-embedded whole first
(``shared.pipeline.reembed``)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from shared.domain.retrieval.synonyms import SynonymPolicy, name_text, synonym_links
from shared.domain.storage import NAME_VECTORS, VectorItem, VectorStore
from shared.domain.tokens import truncate_text
from shared.infra.llm.embedding import Embedder
from shared.infra.store.redis_graph import GraphStore
from shared.infra.store.synonym_store import SynonymStore
from shared.infra.tenancy.usage import CallContext
from shared.pipeline.reembed import mark_entities_dirty, prepare, settle


def entity_text(name: str, description: str) -> str:
    return f"{name}: {description}"


def _entity_batch(store: GraphStore, vectors: VectorStore, embedder: Embedder, ctx, group: list[str],
                  synonyms: SynonymPolicy | None = None) -> int:
    present = store.entities(group)
    gone = [n for n in group if n not in present]
    vectors.delete(store.tenant, "entities", gone)
    items = list(present.values())
    if items:
        vecs = embedder.embed([truncate_text(entity_text(e.name, e.description), 2000) for e in items], ctx)
        vectors.upsert(store.tenant, "entities", [
            VectorItem(e.name, v, {"name": e.name, "type": e.type}) for e, v in zip(items, vecs, strict=True)])
    if synonyms is not None:
        vectors.delete(store.tenant, NAME_VECTORS, gone)
        SynonymStore(store.redis, store.tenant).drop(gone)
        _link_synonyms(store, vectors, embedder, ctx, [e.name for e in items], synonyms)
    store.clear_taken("embed_entities", group)
    return len(items)


def _link_synonyms(store: GraphStore, vectors: VectorStore, embedder: Embedder, ctx, names: list[str],
                   policy: SynonymPolicy) -> None:
    """Embed the names, store them, then link each to its nearest stored names. Each batch searches after its
    own upsert, so of two batches running together the later search sees the other's names: every near pair
    is found from at least one side, and an edge is undirected."""
    if not names:
        return
    vecs = embedder.embed([name_text(n) for n in names], ctx)
    vectors.upsert(store.tenant, NAME_VECTORS, [VectorItem(n, v, {}) for n, v in zip(names, vecs, strict=True)])
    links = {n: synonym_links(n, vectors.search(store.tenant, NAME_VECTORS, v, policy.neighbours + 1,
                                                policy.threshold), policy)
             for n, v in zip(names, vecs, strict=True)}
    SynonymStore(store.redis, store.tenant).link(links)


def _forget_synonyms(store: GraphStore, vectors: VectorStore) -> None:
    """Synonym edges off: the tenant's name vectors and edges go (if it had any)."""
    if SynonymStore(store.redis, store.tenant).clear() or vectors.count(store.tenant, NAME_VECTORS):
        vectors.delete(store.tenant, NAME_VECTORS, store.all_entity_names())


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


def _like_lengths(store: GraphStore, names: list[str], window: int = 4096) -> list[str]:
    """``names`` reordered so that each group the stage embeds holds descriptions of like length (an embedder's
    batch pads to its longest text: ``LocalEmbedder._vectors``); sorted a window at a time, so a tenant embedded
    again whole is not read at once."""
    out: list[str] = []
    for i in range(0, len(names), window):
        part = names[i : i + window]
        size = {name: len(e.description) for name, e in store.entities(part).items()}
        out += sorted(part, key=lambda name: size.get(name, 0))
    return out


def run_index(store: GraphStore, vectors: VectorStore, embedder: Embedder, ctx: CallContext, batch: int = 64,
              parallel: int = 8, synonyms: SynonymPolicy | None = None) -> dict:
    """Idempotent: a batch leaves the dirty set only after its vectors (and, with ``synonyms``, its name vectors
    and synonym edges) are stored. ``reembedded``: this stage embedded the whole tenant again (its embedder
    changed)."""
    reembedded = prepare(store, vectors, embedder, ctx)
    if synonyms is None:
        _forget_synonyms(store, vectors)
    elif not vectors.count(store.tenant, NAME_VECTORS):
        # synonyms just turned on, or the vectors were dropped for another embedder: every name is embedded
        # again, and edges an earlier embedder made go
        SynonymStore(store.redis, store.tenant).clear()
        mark_entities_dirty(store)
    # taken aside: an entity merged again while its batch is embedded keeps its mark for the next stage (its
    # vector may be of the description before); chunks are written once, so their marks are cleared in place
    names = _like_lengths(store, store.take_dirty("embed_entities"))
    chunk_ids = store.dirty_members("embed_chunks")
    with ThreadPoolExecutor(max_workers=parallel) as pool:
        ent = [pool.submit(_entity_batch, store, vectors, embedder, ctx, names[i : i + batch], synonyms)
               for i in range(0, len(names), batch)]
        chk = [pool.submit(_chunk_batch, store, vectors, embedder, ctx, chunk_ids[i : i + batch])
               for i in range(0, len(chunk_ids), batch)]
        done = {"entities": sum(f.result() for f in ent), "chunks": sum(f.result() for f in chk)}
    settle(store, vectors, embedder, reembedded, done["entities"] + done["chunks"])
    return {**done, "reembedded": reembedded}
