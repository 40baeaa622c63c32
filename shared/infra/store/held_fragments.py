"""A merged row that holds its only fragment, so the key needs no fragment hash of its own.

Most entities and relations are named by one chunk only. Their fragment hash then holds one fragment that says
what the merged row says already, and the hash (a Redis key of its own) cost about as much memory as the row.
When a merge finds exactly one fragment and the row it writes gives that fragment back exactly, the row keeps the
rest of the fragment in ``sole`` (the stored fragment form of ``graph_codec`` with the description left out: the
row's own) and the merge deletes the hash in the same transaction.

Reading a key's fragments is then: the hash's fields, plus the row's held fragment when the hash has no field of
that chunk and the chunk's extraction record still exists. Removing a chunk deletes its record (and its hash
fields), so a held fragment of a removed chunk is no longer read, and the next merge of the key (the removal marks
it dirty) drops it. A merge that adds a second fragment to a key whose row held the first writes the held one back
into the hash, in the transaction that writes the row.
"""

from __future__ import annotations

from dataclasses import dataclass

from shared.domain.models import Entity, EntityFragment, Relation, RelationFragment
from shared.infra.redis.text_codec import unpack_text
from shared.infra.store.graph_codec import (
    field_chunk,
    fragment_field,
    pack_entity_fragment,
    pack_relation_fragment,
    unpack_entity_fragment,
    unpack_relation_fragment,
)


@dataclass(frozen=True)
class Held:
    """A row's held fragment as its hash would store it: the chunk, the hash field and the stored value."""

    chunk_id: str
    field: bytes
    value: bytes


def held_fragment(row: Entity | Relation | None) -> Held | None:
    """The fragment ``row`` holds (None when it holds none)."""
    if row is None or not row.sole or len(row.source_ids) != 1:
        return None
    chunk_id = row.source_ids[0]
    fragment = _unpack(row, row.sole, chunk_id).model_copy(update={"description": row.description})
    return Held(chunk_id, fragment_field(chunk_id), _pack(row, fragment, chunk_id))


def _unpack(row: Entity | Relation, value: bytes | str, chunk_id: str) -> EntityFragment | RelationFragment:
    """A stored fragment value of ``row``'s key (``graph_codec``)."""
    if isinstance(row, Entity):
        return unpack_entity_fragment(value, row.name, chunk_id)
    return unpack_relation_fragment(value, row.src, row.tgt, chunk_id)


def _pack(row: Entity | Relation, fragment, chunk_id: str) -> bytes:
    return (pack_entity_fragment if isinstance(row, Entity) else pack_relation_fragment)(fragment, chunk_id)


def holding(row: Entity | Relation, fields: dict) -> Entity | Relation:
    """``row`` as it is written after a merge of the fragments ``fields`` (hash field -> stored value): holding
    the only fragment when it can give it back exactly, else holding none."""
    if len(fields) == 1 and len(row.source_ids) == 1:
        (field, value), = fields.items()
        chunk_id = field_chunk(field)
        if chunk_id == row.source_ids[0]:
            frag = _unpack(row, value, chunk_id)
            sole = unpack_text(_pack(row, frag.model_copy(update={"description": ""}), chunk_id))
            held = _unpack(row, sole, chunk_id).model_copy(update={"description": row.description})
            if not sole.startswith("{") and held == frag:
                return row if row.sole == sole else row.model_copy(update={"sole": sole})
    return row.model_copy(update={"sole": ""}) if row.sole else row


def read_fragments(store, kind: str, keys: list[str], frag_key, target: str, parse):
    """Each key's fragment hash as stored, its row parsed (``parse(key, raw)``; None when absent) and the held
    fragments to read with the hash (key -> ``Held``: the hash has no field of that chunk and the chunk's
    extraction record exists), in two round trips (the second only when some row holds a fragment)."""
    pipe = store.redis.pipeline(transaction=False)
    for key in keys:
        pipe.hgetall(frag_key(key))
    pipe.hmget(target, keys)
    *raws, stored = pipe.execute()
    rows = [parse(key, raw) if raw else None for key, raw in zip(keys, stored, strict=True)]
    candidates = {}
    for key, raw, row in zip(keys, raws, rows, strict=True):
        held = held_fragment(row)
        if held is not None and all(field_chunk(f) != held.chunk_id for f in raw):
            candidates[key] = held
    if candidates:
        pipe = store.redis.pipeline(transaction=False)
        for held in candidates.values():
            pipe.exists(store.k.extraction(held.chunk_id))
        candidates = {key: held for (key, held), n in zip(candidates.items(), pipe.execute(), strict=True) if n}
    return raws, rows, candidates
