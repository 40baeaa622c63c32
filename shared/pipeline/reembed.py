"""The index stage's embedder bookkeeping: a tenant's vectors are all made by one embedder, the one recorded.

Before the stage embeds its dirty entities and chunks, ``prepare`` compares the tenant's recorded embedder
(``shared.infra.store.embedder_record``) with the deployment's. When they differ, the stage re-embeds the whole
tenant: every entity and chunk is marked dirty (``embed_entities``, ``embed_chunks``), the tenant's vectors are
dropped (a Weaviate tenant's shard goes with them, so it takes the new dimensions) and the record says
``reembedding``; queries refuse meanwhile. ``settle`` records the embedder ``ready`` once the stage stored every
vector. The dirty sets are the durable to-do list: a stage that dies midway leaves the rest marked, and the
next stage of any ingestion (finding the ``reembedding`` record of its own embedder) finishes it.
"""

from __future__ import annotations

import logging

from shared.infra.store.embedder_record import (
    READY,
    REEMBEDDING,
    EmbedderRecord,
    describe,
    forget_record,
    hashing_record,
    read_record,
    reproduces,
    stored_sample,
    write_record,
)

log = logging.getLogger(__name__)
MARK_BATCH = 5000  # entity names added to the dirty set per command


def mark_everything_dirty(store) -> None:
    """Every chunk and entity of the tenant awaits embedding (idempotent)."""
    store.redis.sunionstore(store.k.dirty("embed_chunks"), [store.k.dirty("embed_chunks"), store.k.chunks()])
    mark_entities_dirty(store)


def mark_entities_dirty(store) -> None:
    """Every entity of the tenant awaits embedding (idempotent)."""
    redis, k = store.redis, store.k
    names = redis.hkeys(k.entities())
    for i in range(0, len(names), MARK_BATCH):
        redis.sadd(k.dirty("embed_entities"), *names[i : i + MARK_BATCH])


def _legacy_is_current(store, vectors, embedder, ctx, current: EmbedderRecord) -> bool | None:
    """For a tenant without a record: None when it has no vectors, else whether ``embedder`` made them (recorded
    then). The hashing embedder is tried first (local, free), then one call of ``embedder``."""
    sample = stored_sample(store, vectors)
    if sample is None:
        return None if vectors.sample_item(store.tenant, "entities") is None else False
    hashing = hashing_record(sample)
    same = hashing.same_embedder(current) if hashing else reproduces(lambda t: embedder.embed(t, ctx), sample)
    if same:
        write_record(store.redis, store.tenant, EmbedderRecord(current.name, len(sample[1])))
    return same


def prepare(store, vectors, embedder, ctx) -> bool:
    """Start re-embedding the tenant when its vectors are another embedder's; True when this stage (re-)embeds
    the whole tenant. One stage at a time decides (the tenant's ``embedder`` lock), so two ingestions switching
    together drop the vectors once."""
    current = describe(embedder)
    with store.exclusive("embedder", timeout_s=store.lock_timeout_s):
        stored = read_record(store.redis, store.tenant)
        if stored is not None and stored.same_embedder(current):
            return stored.state == REEMBEDDING  # a re-embedding left unfinished: the dirty sets hold the rest
        if stored is None and _legacy_is_current(store, vectors, embedder, ctx, current) in (None, True):
            return False
        log.warning("tenant %s: vectors of %s, re-embedding every entity and chunk with %s (job %s)", store.tenant,
                    stored.label() if stored else "an unrecorded embedder", current.label(), ctx.job_id)
        mark_everything_dirty(store)  # before the drop: a stage dying in between leaves nothing unmarked
        vectors.drop_tenant(store.tenant)
        write_record(store.redis, store.tenant,
                     EmbedderRecord(current.name, current.dims, REEMBEDDING, ctx.job_id))
        return True


def settle(store, vectors, embedder, reembedded: bool, embedded: int) -> None:
    """After the stage stored its vectors: record the embedder ``ready`` (with the dimensions it produced); a
    tenant left without vectors keeps no record."""
    current = describe(embedder)
    stored = read_record(store.redis, store.tenant)
    if not reembedded and not embedded and (stored is None or stored.state == READY):
        return
    if not embedded and all(vectors.sample_item(store.tenant, kind) is None for kind in ("chunks", "entities")):
        forget_record(store.redis, store.tenant)
        return
    dims = current.dims or (stored.dims if stored is not None and stored.same_embedder(current) else None)
    if stored != EmbedderRecord(current.name, dims):
        write_record(store.redis, store.tenant, EmbedderRecord(current.name, dims))
