"""One tenant's documents and chunks in Redis: the document/chunk half of ``GraphStore``."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from shared.domain.models import Chunk, Document
from shared.infra.redis.conn import to_str
from shared.infra.redis.keys import Keys
from shared.infra.redis.text_codec import pack_text, unpack_bytes, unpack_text


class DocumentStore:
    """Documents, their texts and chunks (texts and chunk rows deflated: ``text_codec``). A mixin of ``GraphStore``:
    uses its ``redis`` and ``k``."""

    redis: Any
    k: Keys

    # ------------------------------------------------------------ documents
    def put_document(self, doc: Document, text: str) -> bool:
        """Store a document and its text; False when a document with this id already exists."""
        created = self.redis.set(self.k.doc_text(doc.id), pack_text(text), nx=True)
        if created:
            pipe = self.redis.pipeline(transaction=True)
            pipe.set(self.k.doc(doc.id), doc.model_dump_json())
            pipe.zadd(self.k.docs(), {doc.id: doc.created_at})
            pipe.execute()
        return bool(created)

    def put_original(self, doc: Document, data: bytes) -> bool:
        """Store a document whose text is still to be extracted from ``data`` (a PDF, HTML, DOCX file, kept as
        sent); False when a document with this id already exists."""
        if self.redis.exists(self.k.doc(doc.id)) or not self.redis.set(self.k.doc_original(doc.id), data, nx=True):
            return False
        pipe = self.redis.pipeline(transaction=True)
        pipe.set(self.k.doc(doc.id), doc.model_dump_json())
        pipe.zadd(self.k.docs(), {doc.id: doc.created_at})
        pipe.execute()
        return True

    def original(self, doc_id: str) -> bytes | None:
        """The uploaded file of ``doc_id``; None for a document sent as text."""
        raw = self.redis.get(self.k.doc_original(doc_id))
        return raw if raw is None or isinstance(raw, bytes) else raw.encode("utf-8", "surrogateescape")

    def set_document_text(self, doc_id: str, text: str) -> None:
        """The text extracted from the document's file (what the chunker reads)."""
        self.redis.set(self.k.doc_text(doc_id), pack_text(text))

    def document(self, doc_id: str) -> Document | None:
        raw = self.redis.get(self.k.doc(doc_id))
        return Document.model_validate_json(raw) if raw else None

    def save_document(self, doc: Document) -> None:
        self.redis.set(self.k.doc(doc.id), doc.model_dump_json())

    def document_text(self, doc_id: str) -> str | None:
        raw = self.redis.get(self.k.doc_text(doc_id))
        return unpack_text(raw) if raw is not None else None

    def documents(self, ids: Iterable[str]) -> dict[str, Document]:
        ids = list(ids)
        raws = self.redis.mget([self.k.doc(i) for i in ids]) if ids else []
        return {i: Document.model_validate_json(r) for i, r in zip(ids, raws, strict=True) if r}

    def list_document_ids(self, offset: int = 0, limit: int = 100) -> list[str]:
        return [to_str(x) for x in self.redis.zrange(self.k.docs(), offset, offset + limit - 1)]

    def document_count(self) -> int:
        return self.redis.zcard(self.k.docs())

    def delete_document(self, doc_id: str) -> None:
        """Remove the document record, its text and its listing entry (its chunks are removed separately)."""
        pipe = self.redis.pipeline(transaction=True)
        pipe.delete(self.k.doc(doc_id), self.k.doc_text(doc_id), self.k.doc_original(doc_id))
        pipe.zrem(self.k.docs(), doc_id)
        pipe.execute()

    # --------------------------------------------------------------- chunks
    _ADD_NEW = """
    local added = {}
    for i, id in ipairs(ARGV) do
        if redis.call('SADD', KEYS[1], id) == 1 then
            redis.call('SADD', KEYS[2], id)
            table.insert(added, id)
        end
    end
    return added
    """

    def put_chunks(self, chunks: list[Chunk]) -> list[str]:
        """Store chunks; return the ids new to this tenant (atomically marked for embedding)."""
        if not chunks:
            return []
        pipe = self.redis.pipeline(transaction=True)
        for chunk in chunks:
            pipe.set(self.k.chunk(chunk.id), pack_text(chunk.model_dump_json(exclude_defaults=True)), nx=True)
            pipe.sadd(self.k.chunk_docs(chunk.id), chunk.doc_id)
        pipe.execute()
        added = self.redis.eval(self._ADD_NEW, 2, self.k.chunks(), self.k.dirty("embed_chunks"),
                                *[c.id for c in chunks])
        return [to_str(x) for x in added]

    def chunks(self, ids: Iterable[str]) -> dict[str, Chunk]:
        ids = list(ids)
        raws = self.redis.mget([self.k.chunk(i) for i in ids]) if ids else []
        return {i: Chunk.model_validate_json(unpack_bytes(r)) for i, r in zip(ids, raws, strict=True) if r}

    def chunk(self, chunk_id: str) -> Chunk | None:
        raw = self.redis.get(self.k.chunk(chunk_id))
        return Chunk.model_validate_json(unpack_bytes(raw)) if raw else None

    def all_chunk_ids(self) -> list[str]:
        return sorted(to_str(x) for x in self.redis.smembers(self.k.chunks()))

    def unlink_chunk_document(self, chunk_id: str, doc_id: str) -> int:
        """Drop ``doc_id`` from the documents containing the chunk; return how many documents still do."""
        self.redis.srem(self.k.chunk_docs(chunk_id), doc_id)
        return self.redis.scard(self.k.chunk_docs(chunk_id))

    def delete_chunk(self, chunk_id: str) -> None:
        """Remove the chunk, its document set and its pending embedding mark (not its extraction)."""
        pipe = self.redis.pipeline(transaction=True)
        pipe.delete(self.k.chunk(chunk_id), self.k.chunk_docs(chunk_id))
        pipe.srem(self.k.chunks(), chunk_id)
        pipe.srem(self.k.dirty("embed_chunks"), chunk_id)
        pipe.execute()
