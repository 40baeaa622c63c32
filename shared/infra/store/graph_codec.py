"""Compact stored forms of the per-chunk graph records (fragments and extraction records).

A fragment is one field of its entity's (or relation's) fragment hash: the hash's key names the entity (or the
sorted pair) and the field is the chunk id, so the stored value leaves both out and keeps the rest as a JSON array,
its trailing defaults dropped, deflated when long (``text_codec``). The extraction record keeps only what removing
the chunk needs (the names and relation pairs its fragments are filed under) and its warnings; the fragments
themselves are read back from their hashes when the extraction is reused. Values written before (JSON objects,
``{...}``) are still read.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from shared.domain.models import EntityFragment, ExtractionResult, RelationFragment
from shared.infra.redis.text_codec import pack_text, unpack_bytes

_ENTITY_DEFAULTS = ("unknown", "", "")  # type, description, doc_id
_RELATION_DEFAULTS = ("", "", 1.0, 1.0, "")  # description, keywords, weight, strength, doc_id


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
    return pack_text(_dumps(_trimmed([frag.type, frag.description, frag.doc_id], _ENTITY_DEFAULTS)))


def unpack_entity_fragment(raw: bytes | str, name: str, chunk_id: str) -> EntityFragment:
    raw = unpack_bytes(raw)
    if raw.startswith(b"{"):
        return EntityFragment.model_validate_json(raw)
    values = json.loads(raw)
    kind, description, doc_id = [*values, *_ENTITY_DEFAULTS[len(values):]]
    return EntityFragment(name=name, type=kind, description=description, source_id=chunk_id, doc_id=doc_id)


def pack_relation_fragment(frag: RelationFragment, chunk_id: str) -> bytes:
    """The endpoints are the hash key's sorted pair: a relation is undirected (``merge.relation_key``)."""
    if frag.source_id != chunk_id:
        return pack_text(frag.model_dump_json())
    return pack_text(_dumps(_trimmed([frag.description, frag.keywords, frag.weight, frag.strength, frag.doc_id],
                                     _RELATION_DEFAULTS)))


def unpack_relation_fragment(raw: bytes | str, src: str, tgt: str, chunk_id: str) -> RelationFragment:
    raw = unpack_bytes(raw)
    if raw.startswith(b"{"):
        return RelationFragment.model_validate_json(raw)
    values = json.loads(raw)
    description, keywords, weight, strength, doc_id = [*values, *_RELATION_DEFAULTS[len(values):]]
    return RelationFragment(src=src, tgt=tgt, description=description, keywords=keywords, weight=weight,
                            strength=strength, source_id=chunk_id, doc_id=doc_id)


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
