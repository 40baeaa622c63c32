"""One tenant's extraction records and the fragments they file: the extraction half of ``GraphStore``.

What a chunk says about an entity (relation) is one field, named by the chunk id (``graph_codec.fragment_field``),
of the entity's (sorted pair's) fragment hash; the chunk's extraction record lists where its fragments are filed,
so removing the chunk needs no LLM call and no scan (``graph_codec`` has the stored forms).
"""

from __future__ import annotations

from typing import Any

from shared.domain.models import Chunk, Entity, ExtractionResult, Relation
from shared.infra.redis.keys import SEP, Keys
from shared.infra.redis.text_codec import unpack_bytes
from shared.infra.store.graph_codec import (
    fragment_field,
    legacy_field,
    pack_entity_fragment,
    pack_extraction,
    pack_relation_fragment,
    unpack_entity_fragment,
    unpack_extraction,
    unpack_relation_fragment,
)
from shared.infra.store.held_fragments import held_fragment
from shared.infra.store.row_codec import unpack_row


def rel_field(src: str, tgt: str) -> str:
    a, b = sorted((src, tgt))
    return f"{a}{SEP}{b}"


def split_rel_field(field: str) -> tuple[str, str]:
    a, b = field.split(SEP, 1)
    return a, b


class ExtractionStore:
    """Extraction records and fragments. A mixin of ``GraphStore``: uses its ``redis`` and ``k``."""

    redis: Any
    k: Keys

    def extraction(self, chunk_id: str) -> ExtractionResult | None:
        raw = self.redis.get(self.k.extraction(chunk_id))
        return self._extraction_result(chunk_id, raw) if raw else None

    def chunk_and_extraction(self, chunk_id: str) -> tuple[Chunk | None, ExtractionResult | None]:
        """The chunk and its stored extraction (if any)."""
        chunk, extraction = self.redis.mget([self.k.chunk(chunk_id), self.k.extraction(chunk_id)])
        return (Chunk.model_validate_json(unpack_bytes(chunk)) if chunk else None,
                self._extraction_result(chunk_id, extraction) if extraction else None)

    def _extraction_result(self, chunk_id: str, raw) -> ExtractionResult | None:
        """The extraction a record stands for, its fragments read back from their hashes in one round trip; None
        when one of them is missing (the chunk is then extracted again, which rewrites them all)."""
        index = unpack_extraction(raw)
        if index.result is not None:
            return index.result
        fields = [fragment_field(chunk_id)]
        old = legacy_field(chunk_id)
        if old is not None:  # a fragment may still be filed under the field written before the compact form
            fields.append(old)
        pipe = self.redis.pipeline(transaction=False)
        for name in index.names:
            pipe.hmget(self.k.entity_fragments(name), fields)
        for src, tgt in index.pairs:
            pipe.hmget(self.k.relation_fragments(src, tgt), fields)
        found = pipe.execute() if index.names or index.pairs else []
        raws = [next((r for r in forms if r is not None), None) for forms in found]
        if any(raw is None for raw in raws):
            raws = self._held_by_rows(chunk_id, index, raws)
            if any(raw is None for raw in raws):
                return None
        return ExtractionResult(
            chunk_id=chunk_id, warnings=index.warnings,
            entities=[unpack_entity_fragment(r, name, chunk_id) for name, r in zip(index.names, raws, strict=False)],
            relations=[unpack_relation_fragment(r, src, tgt, chunk_id)
                       for (src, tgt), r in zip(index.pairs, raws[len(index.names):], strict=True)])

    def _held_by_rows(self, chunk_id: str, index, raws: list) -> list:
        """``raws`` with the fragments missing from their hashes read from the rows that hold them
        (``held_fragments``), in one round trip."""
        keys = [*index.names, *(rel_field(*pair) for pair in index.pairs)]
        missing = [i for i, raw in enumerate(raws) if raw is None]
        pipe = self.redis.pipeline(transaction=False)
        for i in missing:
            pipe.hget(self.k.entities() if i < len(index.names) else self.k.relations(), keys[i])
        raws = list(raws)
        for i, row in zip(missing, pipe.execute(), strict=True):
            if row:
                model = Entity if i < len(index.names) else Relation
                held = held_fragment(unpack_row(model, row, keys[i]))
                if held is not None and held.chunk_id == chunk_id:
                    raws[i] = held.value
        return raws

    def extracted(self, chunk_ids: list[str]) -> set[str]:
        """The chunks whose extraction is stored (extracted before, by any job), in one round trip."""
        pipe = self.redis.pipeline(transaction=False)
        for cid in chunk_ids:
            pipe.exists(self.k.extraction(cid))
        return {cid for cid, n in zip(chunk_ids, pipe.execute() if chunk_ids else [], strict=True) if n}

    def save_extraction(self, result: ExtractionResult) -> None:
        """Write the chunk's fragments (idempotent), its record (where they are filed) and mark what they touch
        dirty (one SADD per kind).

        A chunk extracted before the compact field form may have fragments under the older field: they are
        deleted in the same transaction, so the two never stand side by side. Such fields exist only while the
        chunk's record does (fragments and record are written and removed together), so the deletes are sent only
        when the record is there already: a chunk extracted for the first time pays one EXISTS, not one HDEL per
        fragment."""
        cid = result.chunk_id
        field = fragment_field(cid)
        old = legacy_field(cid)
        if old is not None and not self.redis.exists(self.k.extraction(cid)):
            old = None
        pipe = self.redis.pipeline(transaction=True)
        for frag in result.entities:
            key = self.k.entity_fragments(frag.name)
            pipe.hset(key, field, pack_entity_fragment(frag, cid))
            if old is not None:
                pipe.hdel(key, old)
        fields = [rel_field(frag.src, frag.tgt) for frag in result.relations]
        for frag, rfield in zip(result.relations, fields, strict=True):
            key = self.k.relation_fragments(*split_rel_field(rfield))
            pipe.hset(key, field, pack_relation_fragment(frag, cid))
            if old is not None:
                pipe.hdel(key, old)
        names = list(dict.fromkeys(frag.name for frag in result.entities))
        if names:
            pipe.sadd(self.k.dirty("entities"), *names)
        if fields:
            pipe.sadd(self.k.dirty("relations"), *fields)
        pipe.set(self.k.extraction(cid), pack_extraction(
            names, [split_rel_field(f) for f in dict.fromkeys(fields)], result.warnings))
        pipe.execute()

    def remove_chunk_fragments(self, chunk_id: str) -> tuple[set[str], set[str]]:
        """Delete what one chunk contributed, under the compact field and the older one alike; return (entity names,
        relation fields) to re-merge."""
        raw = self.redis.get(self.k.extraction(chunk_id))
        if raw is None:
            return set(), set()
        index = unpack_extraction(raw)
        names = set(index.names)
        fields = {rel_field(src, tgt) for src, tgt in index.pairs}
        forms = [fragment_field(chunk_id)]
        old = legacy_field(chunk_id)
        if old is not None:
            forms.append(old)
        pipe = self.redis.pipeline(transaction=True)
        for name in names:
            pipe.hdel(self.k.entity_fragments(name), *forms)
            pipe.sadd(self.k.dirty("entities"), name)
        for field in fields:
            pipe.hdel(self.k.relation_fragments(*split_rel_field(field)), *forms)
            pipe.sadd(self.k.dirty("relations"), field)
        pipe.delete(self.k.extraction(chunk_id))
        pipe.execute()
        return names, fields
