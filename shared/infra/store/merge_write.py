"""The write half of ``GraphStore.merge_batch``: merged rows filed only for the keys whose fragments did not change
while they were merged (optimistic concurrency, no lock held across a merge's LLM summaries)."""

from __future__ import annotations

import redis as redis_lib

from shared.domain.models import Entity, Relation
from shared.infra.redis.text_codec import pack_text
from shared.infra.store.graph_edges import write_edges
from shared.infra.store.redis_communities import CLUSTER_DIRTY


def row_json(row: Entity | Relation) -> bytes:
    """A merged row as stored: its fields at their defaults left out (they read back as the defaults), deflated
    when long (``text_codec``; rows written before, plain JSON, still read)."""
    return pack_text(row.model_dump_json(exclude_defaults=True))


def write_merged(store, kind, keys, frag_key, target, raws, results) -> set[str]:
    """Write the merged records (``results``) of the keys whose fragment hash still holds what was read (``raws``);
    returns those keys. The others are merged again by the caller from what they hold now, so a concurrent
    extraction writing into a few hub keys does not send the whole batch back, round after round, until it fails.

    WATCH first (on the transaction's connection), then re-read every fragment hash in one pipelined round trip on
    another connection: a change before the re-read shows in the comparison, a change after the WATCH aborts the
    EXEC. When some keys changed, the watch is narrowed to the others and those are compared once more."""
    with store.redis.pipeline(transaction=True) as pipe:
        try:
            pipe.watch(*[frag_key(k) for k in keys])
            same = unchanged(store.redis, keys, frag_key, raws)
            if len(same) < len(keys):
                pipe.unwatch()
                if not same:
                    return set()
                pipe.watch(*[frag_key(k) for k in same])
                read = dict(zip(keys, raws, strict=True))
                if len(unchanged(store.redis, same, frag_key, [read[k] for k in same])) < len(same):
                    return set()
            pipe.multi()
            edges: dict[str, float | None] = {}
            for key in same:
                value = results[key]
                pipe.srem(store.k.dirty(kind), key)
                if value is None:
                    pipe.hdel(target, key)
                else:
                    pipe.hset(target, key, row_json(value))
                if kind == "entities":
                    pipe.sadd(store.k.dirty("embed_entities"), key)
                else:
                    edges[key] = None if value is None else value.weight
            write_edges(pipe, store.k, edges)
            pipe.sadd(store.k.dirty(CLUSTER_DIRTY[kind != "entities"]), *same)
            store._bump(pipe)
            pipe.execute()
            return set(same)
        except redis_lib.WatchError:
            return set()


def unchanged(redis, keys: list[str], frag_key, raws: list[dict]) -> list[str]:
    """The keys whose fragment hash still holds what was read (``raws``), in one pipelined round trip."""
    reread = redis.pipeline(transaction=False)
    for k in keys:
        reread.hgetall(frag_key(k))
    return [k for k, now, then in zip(keys, reread.execute(), raws, strict=True) if now == then]
