"""Compact stored form of the merged graph rows: the values of ``Keys.entities()`` and ``Keys.relations()``.

A row is one field of its tenant's entity (relation) hash, named by the entity (the sorted pair, ``rel_field``),
so the stored value leaves the name (the endpoints) out and keeps the model's other fields as a JSON array, in
the order the model declares them, the trailing ones at their defaults dropped, deflated when long
(``text_codec``). A tenant holds one row per entity and per relation, so what every row used to repeat (the
field names, the key its hash field already holds, ids spelled out in full) was a large share of the graph's
memory; now it is the values alone, and the ids that fill most of a row take less room:

- a chunk id ``chunk-<32 lowercase hex>`` and a doc id ``doc-<32 lowercase hex>`` are stored as ``~`` and the
  16 bytes in unpadded base64url (``graph_codec.pack_hex_id``); any other id is stored as written, with a second
  ``~`` in front when it starts with ``~``;
- a ``bool`` field is stored as 0 or 1;
- the degree is not stored: it is the degrees hash's, and every reader sets it from there (``GraphStore``).

The array follows ``model_fields``, so a field added to ``Entity`` or ``Relation`` is stored with no change
here, provided it is added at the end: a row written before has no value for it and reads back its default.
Fields are never reordered or removed (rows already stored would read wrongly).

A relation whose endpoints its field cannot give back (not in sorted order, or holding the field's separator;
a merge never writes one) is stored whole, as a JSON object. Rows written before this form (JSON objects,
``{...}``, so never mistaken for an array) are still read.
"""

from __future__ import annotations

import json
from functools import cache
from typing import NamedTuple

from pydantic_core import from_json, to_jsonable_python

from shared.domain.models import Entity, Relation
from shared.infra.redis.keys import SEP
from shared.infra.redis.text_codec import pack_text, unpack_bytes
from shared.infra.store.graph_codec import pack_hex_id, unpack_hex_id

KEY_FIELDS = {Entity: ("name",), Relation: ("src", "tgt")}  # named by the hash field, not stored
UNSTORED = frozenset({"degree"})
_ID_PREFIX = {"source_ids": "chunk-", "doc_ids": "doc-"}


class Layout(NamedTuple):
    """What a row of one model stores: its fields in order, whether each is a ``bool``, their defaults as stored,
    and the (position, id prefix) of its id lists."""

    names: tuple[str, ...]
    flags: tuple[bool, ...]
    defaults: tuple
    ids: tuple[tuple[int, str], ...]


def _encode(name: str, value, flag: bool):
    if name in _ID_PREFIX:
        prefix = _ID_PREFIX[name]
        return [pack_hex_id(x, prefix) for x in value]
    return int(value) if flag else value


@cache
def layout(model: type[Entity] | type[Relation]) -> Layout:
    fields = [(n, f) for n, f in model.model_fields.items() if n not in KEY_FIELDS[model] and n not in UNSTORED]
    names = tuple(n for n, _ in fields)
    flags = tuple(f.annotation is bool for _, f in fields)
    defaults = tuple(_encode(n, to_jsonable_python(f.get_default(call_default_factory=True)), flag)
                     for (n, f), flag in zip(fields, flags, strict=True))
    return Layout(names, flags, defaults, tuple((i, _ID_PREFIX[n]) for i, n in enumerate(names) if n in _ID_PREFIX))


def pack_row(row: Entity | Relation) -> bytes:
    """``row`` as stored in its hash (the form is in the module docstring)."""
    if isinstance(row, Relation) and (row.src > row.tgt or SEP in row.src):
        return pack_text(row.model_dump_json(exclude_defaults=True))  # not the sorted pair: kept whole
    names, flags, defaults, _ = layout(type(row))
    dumped = row.model_dump(mode="json")
    values = [_encode(n, dumped[n], flag) for n, flag in zip(names, flags, strict=True)]
    n = len(values)
    while n and values[n - 1] == defaults[n - 1]:
        n -= 1
    return pack_text(json.dumps(values[:n], ensure_ascii=False, separators=(",", ":")))


def unpack_row(model: type[Entity] | type[Relation], raw: bytes | str, key: str) -> Entity | Relation:
    """The row stored as ``raw`` in the field ``key`` (an entity's name, or a relation's ``rel_field``), in either
    the compact form or the older JSON object. Its degree is 0 (readers set it from the degrees hash)."""
    data = unpack_bytes(raw)
    if data.startswith(b"{"):
        return model.model_validate_json(data)
    values = from_json(data)
    shape = layout(model)
    for i, prefix in shape.ids:
        if i < len(values):
            values[i] = [unpack_hex_id(x, prefix) for x in values[i]]
    row = dict(zip(shape.names, values, strict=False))  # the trailing fields left out read as their defaults
    row.update(zip(KEY_FIELDS[model], key.split(SEP, 1) if model is Relation else (key,), strict=True))
    return model.model_validate(row)


def row_field(model: type[Entity] | type[Relation], raw: bytes | str, key: str, field: str):
    """One field of the row stored as ``raw``, read without building the model: what a reader of every row that
    needs one field (the walk: each entity's passages; the entity index: its description) pays per row."""
    data = unpack_bytes(raw)
    if data.startswith(b"{"):
        return getattr(unpack_row(model, data, key), field)
    shape = layout(model)
    at = shape.names.index(field)
    values = from_json(data)
    if at >= len(values):
        return model.model_fields[field].get_default(call_default_factory=True)
    prefix = dict(shape.ids).get(at)
    if prefix is not None:
        return [unpack_hex_id(x, prefix) for x in values[at]]
    return bool(values[at]) if shape.flags[at] else values[at]
