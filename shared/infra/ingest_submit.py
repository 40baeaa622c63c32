"""Validate documents and enqueue an ingestion job (used by the gateway and the CLI)."""

from __future__ import annotations

import hashlib
import time
import unicodedata
from dataclasses import dataclass, field

from shared.domain.ids import content_hash, doc_id_for, new_job_id, validate_tenant
from shared.domain.models import Document
from shared.infra.jobs import JobStore
from shared.infra.messages import ChunkDocument, DeleteDocument, ParseDocument, send, send_all
from shared.infra.store.redis_graph import GraphStore

MAX_DOCUMENTS = 10_000  # documents in one ingestion batch


class InvalidDocument(ValueError):
    """A document was rejected before anything was enqueued; ``code`` is machine-readable."""

    def __init__(self, code: str, message: str, index: int | None = None):
        super().__init__(message)
        self.code = code
        self.index = index


@dataclass
class DocumentInput:
    text: str
    title: str = ""
    id: str | None = None
    metadata: dict[str, str] = field(default_factory=dict)
    data: bytes | None = None  # an uploaded file whose text a parse task extracts (``text`` is then "")
    media_type: str = ""  # of ``data``, from its magic bytes (``shared.domain.parsing.sniff``)


def decode_bytes(data: bytes, name: str = "file") -> str:
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        reason = f"{name}: not valid UTF-8 ({exc.reason} at byte {exc.start})"
        raise InvalidDocument("invalid_encoding", reason) from exc


def clean_text(text: str) -> str:
    """Drop NULs and other C0 controls except tab/newline; strip a leading BOM."""
    text = text.lstrip("\ufeff")
    return "".join(ch for ch in text if ch in "\t\n\r" or unicodedata.category(ch) != "Cc")


class ValidDocuments(tuple):
    """Documents that passed :func:`validate_documents` (cleaned text), with the size limit they were checked
    against: validating them again under the same or a looser limit returns them as they are, so a batch the
    gateway validated before its quota checks is not validated a second time when it is submitted."""

    max_bytes: int
    max_docs: int

    def __new__(cls, items, max_bytes: int, max_docs: int) -> ValidDocuments:
        self = super().__new__(cls, items)
        self.max_bytes, self.max_docs = max_bytes, max_docs
        return self


def _valid_file(item: DocumentInput, i: int, max_bytes: int) -> DocumentInput:
    if len(item.data) > max_bytes:
        size = len(item.data)
        raise InvalidDocument("document_too_large", f"document {i}: file of {size} bytes exceeds {max_bytes}", i)
    if not item.data:
        raise InvalidDocument("empty_document", f"document {i}: the file is empty", i)
    return item


def validate_documents(items: list[DocumentInput], max_bytes: int, max_docs: int = MAX_DOCUMENTS,
                       max_files_bytes: int = 50_000_000) -> ValidDocuments:
    """Check a batch before anything is stored or enqueued (the one place documents are validated)."""
    if isinstance(items, ValidDocuments) and items.max_bytes <= max_bytes and items.max_docs <= max_docs:
        return items
    if not items:
        raise InvalidDocument("empty_batch", "no documents given")
    if len(items) > max_docs:
        raise InvalidDocument("too_many_documents", f"{len(items)} documents in one batch; the limit is {max_docs}")
    out = []
    for i, item in enumerate(items):
        if item.data is not None:
            out.append(_valid_file(item, i, max_files_bytes))
            continue
        if not isinstance(item.text, str):
            raise InvalidDocument("invalid_text", f"document {i}: text must be a string", i)
        size = len(item.text.encode("utf-8", "surrogatepass"))
        if size > max_bytes:
            raise InvalidDocument("document_too_large", f"document {i}: {size} bytes exceeds {max_bytes}", i)
        try:
            item.text.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise InvalidDocument("invalid_encoding", f"document {i}: lone surrogate characters", i) from exc
        text = clean_text(item.text)
        if not text.strip():
            raise InvalidDocument("empty_document", f"document {i}: text is empty", i)
        out.append(DocumentInput(text=text, title=item.title, id=item.id, metadata=dict(item.metadata)))
    return ValidDocuments(out, max_bytes, max_docs)


def submit_ingestion(redis, celery, tenant: str, items: list[DocumentInput], settings) -> dict:
    """Store documents (deduplicated by content hash) and enqueue one chunk task per document."""
    validate_tenant(tenant)
    docs = validate_documents(items, settings.chunking.max_document_bytes,
                              max_files_bytes=settings.chunking.max_original_bytes)
    store, jobs = GraphStore(redis, tenant), JobStore(redis, tenant)
    job_id = new_job_id()
    now = time.time()
    doc_ids: list[str] = []
    files: set[str] = set()  # documents whose text a parse task extracts from their file
    new_docs = 0
    for item in docs:
        if item.data is not None:
            digest = hashlib.sha256(item.data).hexdigest()[:32]
            doc_id = item.id or f"doc-{digest}"
            doc = Document(id=doc_id, tenant=tenant, title=item.title, text_hash=digest, created_at=now,
                           metadata={**item.metadata, "media_type": item.media_type})
            new_docs += store.put_original(doc, item.data)
            files.add(doc_id)
        else:
            doc_id = item.id or doc_id_for(item.text)
            doc = Document(id=doc_id, tenant=tenant, title=item.title, text_hash=content_hash(item.text),
                           metadata=item.metadata, created_at=now)
            new_docs += store.put_document(doc, item.text)
        if doc_id not in doc_ids:
            doc_ids.append(doc_id)
    parse = [d for d in doc_ids if d in files and store.document_text(d) is None]  # a re-upload is parsed once
    jobs.create(job_id, "ingest", doc_ids, {"new_documents": new_docs}, files=parse)
    send_all(celery, [(ParseDocument if d in parse else ChunkDocument)(tenant, job_id, d) for d in doc_ids])
    return {"job_id": job_id, "documents": len(doc_ids), "new_documents": new_docs}


def submit_deletion(redis, celery, tenant: str, doc_id: str) -> str:
    """Enqueue the removal of one document (a ``delete`` job: remove, then merge, cluster, report, index)."""
    job_id = new_job_id()
    JobStore(redis, tenant).create(job_id, "delete", [doc_id])
    send(celery, DeleteDocument(tenant, job_id, doc_id))
    return job_id
