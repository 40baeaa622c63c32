"""The write half of ``GraphStore.merge_batch``: merged rows filed only for the keys whose fragments did not change
while they were merged (optimistic concurrency, no lock held across a merge's LLM summaries)."""

from __future__ import annotations

import redis as redis_lib

from shared.domain.models import Entity, Relation
from shared.infra.store import change_log
from shared.infra.store.graph_edges import write_edges
from shared.infra.store.redis_communities import CLUSTER_DIRTY
from shared.infra.store.row_codec import pack_row


def row_json(row: Entity | Relation) -> bytes:
    """A merged row as stored (``row_codec.pack_row``: a compact JSON array; ``unpack_row`` reads it back, and
    the JSON objects written before)."""
    return pack_row(row)


def write_merged(store, kind, keys, frag_key, target, raws, results, held=None, before=None) -> set[str]:
    """Write the merged records (``results``) of the keys whose fragment hash still holds what was read (``raws``)
    and whose held fragment (``held``: key -> ``held_fragments.Held``, read with the hash) still stands; returns
    those keys. The others are merged again by the caller from what they hold now, so a concurrent extraction
    writing into a few hub keys does not send the whole batch back, round after round, until it fails.

    WATCH first (on the transaction's connection), then re-read every fragment hash (and the extraction record of
    every held fragment's chunk: removing the chunk deletes it) in one pipelined round trip on another connection: a
    change before the re-read shows in the comparison, a change after the WATCH aborts the EXEC. When some keys
    changed, the watch is narrowed to the others and those are compared once more.

    A row that holds its only fragment is written with its hash deleted; a row that no longer holds the fragment
    it held is written with that fragment put back into its hash.

    With ``before`` (key -> the row the merge started from, or None), each written key's change in description
    characters is counted in ``Keys.char_delta`` (0 included: a row merged again with its description unchanged is
    known to have added nothing), for the clustering's bound on a community's report input
    (``Community.input_chars_max``), and an entity whose description and type are what they were is not marked to
    be embedded again (``_embeds_anew``). The entity names written are appended to the tenant's entity change log
    (``change_log``) in the same transaction."""
    held = held or {}

    def watched(ks: list[str]) -> list[str]:
        return [frag_key(k) for k in ks] + [store.k.extraction(held[k].chunk_id) for k in ks if k in held]

    with store.redis.pipeline(transaction=True) as pipe:
        try:
            pipe.watch(*watched(keys))
            same = unchanged(store, keys, frag_key, raws, held)
            if len(same) < len(keys):
                pipe.unwatch()
                if not same:
                    return set()
                pipe.watch(*watched(same))
                read = dict(zip(keys, raws, strict=True))
                if len(unchanged(store, same, frag_key, [read[k] for k in same], held)) < len(same):
                    return set()
            pipe.multi()
            _queue_writes(pipe, store, kind, same, frag_key, target, results, held, before)
            pipe.execute()
            return set(same)
        except redis_lib.WatchError:
            return set()


def _queue_writes(pipe, store, kind, same, frag_key, target, results, held, before) -> None:
    """Queue on the transaction the rows of ``same`` and what follows them: their marks, description counts, edge
    weights (relations) or change log entries (entities: the query workers' entity indexes then re-read these rows
    only, ``bm25_cache``), and a new graph version."""
    edges: dict[str, float | None] = {}
    for key in same:
        value = results[key]
        pipe.srem(store.k.dirty(kind), key)
        _file_row(pipe, target, key, value, frag_key(key), held.get(key))
        if before is not None:
            pipe.hincrby(store.k.char_delta(kind), key, _chars(value) - _chars(before.get(key)))
        if kind == "entities":
            if _embeds_anew(value, before, key):
                pipe.sadd(store.k.dirty("embed_entities"), key)
        else:
            edges[key] = None if value is None else value.weight
    write_edges(pipe, store.k, edges)
    if kind == "entities":
        change_log.append(pipe, store.k.entity_log(), store.k.entity_logged(), target, same)
    pipe.sadd(store.k.dirty(CLUSTER_DIRTY[kind != "entities"]), *same)
    store._bump(pipe)


def _embeds_anew(row: Entity | None, before: dict | None, key: str) -> bool:
    """Whether an entity's vectors are to be made again: a new or removed row, or one whose description or type
    changed (its vector embeds name and description, its vector's metadata holds the type). A hub named again by
    every batch often keeps its description (its summary stands): it is not embedded again."""
    stored = before.get(key) if before is not None else None
    return row is None or stored is None or (row.description, row.type) != (stored.description, stored.type)


def _chars(row: Entity | Relation | None) -> int:
    return len(row.description) if row is not None else 0


def _file_row(pipe, target: str, key: str, value, frag_hash: str, held) -> None:
    """Queue the write of one merged row (None: its deletion) and of its fragment hash: deleted when the row
    holds its only fragment, given back the fragment the row held when it holds it no longer."""
    if value is None:
        pipe.hdel(target, key)
        return
    pipe.hset(target, key, row_json(value))
    if value.sole:
        pipe.delete(frag_hash)
    elif held is not None:
        pipe.hset(frag_hash, held.field, held.value)


def unchanged(store, keys: list[str], frag_key, raws: list[dict], held: dict) -> list[str]:
    """The keys whose fragment hash still holds what was read (``raws``) and whose held fragment's chunk still has
    its extraction record, in one pipelined round trip."""
    reread = store.redis.pipeline(transaction=False)
    for k in keys:
        reread.hgetall(frag_key(k))
    for k in keys:
        if k in held:
            reread.exists(store.k.extraction(held[k].chunk_id))
    replies = reread.execute()
    hashes, alive = replies[:len(keys)], dict(zip([k for k in keys if k in held], replies[len(keys):], strict=True))
    return [k for k, now, then in zip(keys, hashes, raws, strict=True) if now == then and alive.get(k, True)]
