"""Compact stored forms of the per-chunk graph records (fragments and extraction records).

A fragment is one field of its entity's (or relation's) fragment hash: the hash's key names the entity (or the
sorted pair) and the field names the chunk, so the stored value leaves both out and keeps the rest as a JSON array,
its trailing defaults dropped, deflated when long (``text_codec``). The extraction record keeps only what removing
the chunk needs (the names and relation pairs its fragments are filed under) and its warnings; the fragments
themselves are read back from their hashes when the extraction is reused. Values written before (JSON objects,
``{...}``) are still read.

The field (``fragment_field`` / ``field_chunk``, the only way in and out for every reader and writer):

- a chunk id of the standard form ``chunk-<32 lowercase hex>`` (``shared.domain.ids.chunk_id_for``) is its 16 raw
  bytes;
- any other chunk id is its UTF-8 as written, except that one whose UTF-8 is exactly 16 bytes long, or longer than
  16 and starting with NUL, gets a NUL byte in front.

So a field of exactly 16 bytes is always a standard id, a longer one starting with NUL is an escaped free-form id,
and anything else is a free-form id as written: the two forms never meet. Fields written before were the chunk
id as written (38 bytes for a standard id); they are still read (``field_chunk`` sees a 38-byte field as a
free-form id, which it is, character for character), and ``legacy_field`` names that older field of a standard id
so a reader can fall back to it and a writer or a removal can delete it. Free-form ids exist only in tests: the
service has always made chunk ids with ``chunk_id_for``.

The doc id inside a value (``pack_doc_id`` / ``unpack_doc_id``): ``doc-<32 lowercase hex>`` (``doc_id_for``) is
stored as ``~`` and the 16 bytes in unpadded base64url (23 characters instead of 36); another doc id starting with
``~`` gets a second ``~`` in front; any other is stored as written. A doc id the service accepts (``doc_id_for``
or the API's pattern, which starts with a letter or digit) never starts with ``~``, so values written before read
as they were. ``pack_hex_id`` / ``unpack_hex_id`` are the same rule for any such prefix (the merged rows' chunk ids,
``row_codec``).
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from dataclasses import dataclass, field

from shared.domain.models import EntityFragment, ExtractionResult, RelationFragment
from shared.infra.redis.text_codec import pack_text, unpack_bytes

_STANDARD_CHUNK = re.compile(r"chunk-([0-9a-f]{32})\Z")
_HEX_ID = re.compile(r"[0-9a-f]{32}\Z")
_RAW_ID_BYTES = 16
_FIELD_ESCAPE = b"\x00"
_ID_MARK = "~"

_ENTITY_DEFAULTS = ("unknown", "", "")  # type, description, doc_id
_RELATION_DEFAULTS = ("", "", 1.0, 1.0, "")  # description, keywords, weight, strength, doc_id


def fragment_field(chunk_id: str) -> bytes:
    """The fragment hash field of ``chunk_id`` (the rule is in the module docstring)."""
    match = _STANDARD_CHUNK.match(chunk_id)
    if match:
        return bytes.fromhex(match.group(1))
    raw = chunk_id.encode()
    if len(raw) == _RAW_ID_BYTES or (len(raw) > _RAW_ID_BYTES and raw.startswith(_FIELD_ESCAPE)):
        return _FIELD_ESCAPE + raw
    return raw


def field_chunk(field: bytes | str) -> str:
    """The chunk id a fragment hash field names, in either the compact form or the older one (the id as written)."""
    if isinstance(field, str):
        field = field.encode()
    if len(field) == _RAW_ID_BYTES:
        return "chunk-" + field.hex()
    if len(field) > _RAW_ID_BYTES and field.startswith(_FIELD_ESCAPE):
        return field[1:].decode()
    return field.decode()


def legacy_field(chunk_id: str) -> bytes | None:
    """The field a standard chunk id's fragments were filed under before the compact form (the id as written);
    None for a free-form id, whose field has not changed (the service never made one 16 bytes long)."""
    return chunk_id.encode() if _STANDARD_CHUNK.match(chunk_id) else None


def pack_hex_id(value: str, prefix: str) -> str:
    """``value`` as stored in a value: ``<prefix><32 lowercase hex>`` compact (the rule is in the module docstring)."""
    if value.startswith(prefix) and _HEX_ID.match(value, len(prefix)):
        return _ID_MARK + base64.urlsafe_b64encode(bytes.fromhex(value[len(prefix):])).decode().rstrip("=")
    return _ID_MARK + value if value.startswith(_ID_MARK) else value


def unpack_hex_id(stored: str, prefix: str) -> str:
    if not stored.startswith(_ID_MARK):
        return stored
    rest = stored[1:]
    if rest.startswith(_ID_MARK):
        return rest
    return prefix + binascii.a2b_base64((rest + "==").replace("-", "+").replace("_", "/")).hex()  # base64url


def pack_doc_id(doc_id: str) -> str:
    """The doc id as stored in a fragment's value (the rule is in the module docstring)."""
    return pack_hex_id(doc_id, "doc-")


def unpack_doc_id(stored: str) -> str:
    return unpack_hex_id(stored, "doc-")


def _dumps(value) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _trimmed(values: list, defaults: tuple) -> list:
    """``values`` without the trailing ones equal to their defaults."""
    n = len(values)
    while n and values[n - 1] == defaults[n - 1]:
        n -= 1
    return values[:n]


def pack_entity_fragment(frag: EntityFragment, chunk_id: str) -> bytes:
    if frag.source_id != chunk_id:  # filed under another chunk than its own (never by the pipeline): kept whole
        return pack_text(frag.model_dump_json())
    return pack_text(_dumps(_trimmed([frag.type, frag.description, pack_doc_id(frag.doc_id)], _ENTITY_DEFAULTS)))


def unpack_entity_fragment(raw: bytes | str, name: str, chunk_id: str) -> EntityFragment:
    raw = unpack_bytes(raw)
    if raw.startswith(b"{"):
        return EntityFragment.model_validate_json(raw)
    values = json.loads(raw)
    kind, description, doc_id = [*values, *_ENTITY_DEFAULTS[len(values):]]
    return EntityFragment(name=name, type=kind, description=description, source_id=chunk_id,
                          doc_id=unpack_doc_id(doc_id))


def pack_relation_fragment(frag: RelationFragment, chunk_id: str) -> bytes:
    """The endpoints are the hash key's sorted pair: a relation is undirected (``merge.relation_key``)."""
    if frag.source_id != chunk_id:
        return pack_text(frag.model_dump_json())
    return pack_text(_dumps(_trimmed(
        [frag.description, frag.keywords, frag.weight, frag.strength, pack_doc_id(frag.doc_id)], _RELATION_DEFAULTS)))


def unpack_relation_fragment(raw: bytes | str, src: str, tgt: str, chunk_id: str) -> RelationFragment:
    raw = unpack_bytes(raw)
    if raw.startswith(b"{"):
        return RelationFragment.model_validate_json(raw)
    values = json.loads(raw)
    description, keywords, weight, strength, doc_id = [*values, *_RELATION_DEFAULTS[len(values):]]
    return RelationFragment(src=src, tgt=tgt, description=description, keywords=keywords, weight=weight,
                            strength=strength, source_id=chunk_id, doc_id=unpack_doc_id(doc_id))


@dataclass
class ExtractionIndex:
    """Where one chunk's fragments are filed: entity names and sorted relation pairs, and its warnings.
    ``result`` is the whole extraction when the record was written in the older, complete form."""

    names: list[str]
    pairs: list[tuple[str, str]]
    warnings: list[str] = field(default_factory=list)
    result: ExtractionResult | None = None


def pack_extraction(names: list[str], pairs: list[tuple[str, str]], warnings: list[str]) -> bytes:
    """``{"n": [names], "e": entity count, "r": [i, j, ...], "w": [warnings]}``: the entity names first, then any
    relation endpoint that is not one of them; each pair as two indexes into ``n``."""
    order = dict.fromkeys(names)
    entity_count = len(order)
    for pair in pairs:
        order.update(dict.fromkeys(pair))
    index = {name: i for i, name in enumerate(order)}
    record: dict = {"n": list(order), "e": entity_count, "r": [index[x] for pair in pairs for x in pair]}
    if warnings:
        record["w"] = warnings
    return pack_text(_dumps(record))


def unpack_extraction(raw: bytes | str) -> ExtractionIndex:
    record = json.loads(unpack_bytes(raw))
    if "chunk_id" in record:  # the older, complete form
        result = ExtractionResult.model_validate(record)
        pairs = list(dict.fromkeys((min(f.src, f.tgt), max(f.src, f.tgt)) for f in result.relations))
        return ExtractionIndex(list(dict.fromkeys(f.name for f in result.entities)), pairs, list(result.warnings),
                               result)
    names, r = record["n"], record["r"]
    return ExtractionIndex(names[:record["e"]], [(names[r[i]], names[r[i + 1]]) for i in range(0, len(r), 2)],
                           record.get("w", []))


def longest_first(items: list[tuple[str, dict]]) -> list[tuple[str, dict]]:
    """(key, fragment hash) pairs with the most fragment bytes first (ties: as given). A merge batch applies its
    merge function to them in this order: the longest merged descriptions are the ones that need an LLM summary,
    so in a thread pool's ``map`` every summary of the batch is sent at the start, and the cheap merges queued
    behind run while they are in flight (longest processing time first)."""
    return sorted(items, key=lambda item: -sum(len(v) for v in item[1].values()))
