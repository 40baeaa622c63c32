"""Validate documents and enqueue an ingestion job (used by the gateway and the CLI)."""

from __future__ import annotations

import hashlib
import time
import unicodedata
from dataclasses import dataclass, field

from shared.domain.ids import content_hash, doc_id_for, new_job_id, validate_tenant
from shared.domain.models import Document
from shared.infra.jobs.store import JobStore
from shared.infra.messaging.messages import ChunkDocument, DeleteDocument, ParseDocument, send, send_all
from shared.infra.store.redis_graph import GraphStore

MAX_DOCUMENTS = 10_000  # documents in one ingestion batch


class InvalidDocument(ValueError):
    """A document or a batch was rejected before anything was enqueued; ``code`` is machine-readable.
    ``refused`` lists every refused document of the batch (``Refusal.body()``) when the refusal is theirs."""

    def __init__(self, code: str, message: str, index: int | None = None, refused: list[dict] | None = None):
        super().__init__(message)
        self.code = code
        self.index = index
        self.refused = refused or []


@dataclass
class DocumentInput:
    text: str
    title: str = ""
    id: str | None = None
    metadata: dict[str, str] = field(default_factory=dict)
    data: bytes | None = None  # an uploaded file whose text a parse task extracts (``text`` is then "")
    media_type: str = ""  # of ``data``, from its magic bytes (``shared.domain.documents.sniff``)
    name: str = ""  # how a refusal names it: its file name (else its id, title, or its index in the batch)
    refusal: tuple[str, str] | None = None  # (code, reason): found unacceptable while it was read (type, encoding)


@dataclass
class Refusal:
    """A document of a batch that was not ingested, and why."""

    index: int
    name: str
    code: str
    reason: str
    doc_id: str | None = None

    def body(self) -> dict:
        return {"doc_id": self.doc_id, "name": self.name, "index": self.index, "stage": "validate",
                "code": self.code, "cause": self.reason}


def document_name(item: DocumentInput, i: int) -> str:
    return item.name or item.id or item.title or f"document {i}"


def refused_file(name: str, code: str, reason: str, **fields) -> DocumentInput:
    """A file refused while it was read: it stays in the batch so the job status names it."""
    return DocumentInput(text="", title=name, name=name, refusal=(code, reason), **fields)


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
    against and the documents refused (``refused``, not ingested): validating them again under the same or a
    looser limit returns them as they are, so a batch the gateway validated before its quota checks is not
    validated a second time when it is submitted."""

    max_bytes: int
    max_docs: int
    refused: tuple[Refusal, ...]

    def __new__(cls, items, max_bytes: int, max_docs: int, refused=()) -> ValidDocuments:
        self = super().__new__(cls, items)
        self.max_bytes, self.max_docs, self.refused = max_bytes, max_docs, tuple(refused)
        return self


def _valid_file(item: DocumentInput, max_bytes: int) -> DocumentInput:
    if len(item.data) > max_bytes:
        raise InvalidDocument("document_too_large", f"file of {len(item.data)} bytes exceeds {max_bytes}")
    if not item.data:
        raise InvalidDocument("empty_document", "the file is empty")
    return item


def _valid_text(item: DocumentInput, max_bytes: int) -> DocumentInput:
    if not isinstance(item.text, str):
        raise InvalidDocument("invalid_text", "text must be a string")
    size = len(item.text.encode("utf-8", "surrogatepass"))
    if size > max_bytes:
        raise InvalidDocument("document_too_large", f"{size} bytes exceeds {max_bytes}")
    try:
        item.text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidDocument("invalid_encoding", "lone surrogate characters") from exc
    text = clean_text(item.text)
    if not text.strip():
        raise InvalidDocument("empty_document", "text is empty")
    return DocumentInput(text=text, title=item.title, id=item.id, metadata=dict(item.metadata), name=item.name)


def _check(item: DocumentInput, i: int, max_bytes: int, max_files_bytes: int) -> DocumentInput | Refusal:
    name = document_name(item, i)
    if item.refusal is not None:
        code, reason = item.refusal
        return Refusal(i, name, code, reason if reason.startswith(name) else f"{name}: {reason}", item.id)
    try:
        return _valid_file(item, max_files_bytes) if item.data is not None else _valid_text(item, max_bytes)
    except InvalidDocument as exc:
        return Refusal(i, name, exc.code, f"{name}: {exc}", item.id)


def refusal_error(refused: list[Refusal]) -> InvalidDocument:
    """The batch refused for its documents: the first one's code, each refused document's reason."""
    first = refused[0]
    message = "; ".join(r.reason for r in refused)
    return InvalidDocument(first.code, message, first.index, [r.body() for r in refused])


def validate_documents(items: list[DocumentInput], max_bytes: int, max_docs: int = MAX_DOCUMENTS,
                       max_files_bytes: int = 50_000_000, atomic: bool = False) -> ValidDocuments:
    """Check a batch before anything is stored or enqueued (the one place documents are validated). An invalid
    document is refused and the rest are kept (``ValidDocuments.refused``); with ``atomic`` one invalid document
    refuses the whole batch, and so does a batch with no valid document (``InvalidDocument``, naming each)."""
    if isinstance(items, ValidDocuments) and items.max_bytes <= max_bytes and items.max_docs <= max_docs:
        return items
    if not items:
        raise InvalidDocument("empty_batch", "no documents given")
    if len(items) > max_docs:
        raise InvalidDocument("too_many_documents", f"{len(items)} documents in one batch; the limit is {max_docs}")
    checked = [_check(item, i, max_bytes, max_files_bytes) for i, item in enumerate(items)]
    refused = [c for c in checked if isinstance(c, Refusal)]
    if refused and (atomic or len(refused) == len(checked)):
        raise refusal_error(refused)
    return ValidDocuments([c for c in checked if not isinstance(c, Refusal)], max_bytes, max_docs, refused)


def submit_ingestion(redis, celery, tenant: str, items: list[DocumentInput], settings, atomic: bool = False) -> dict:
    """Store the valid documents (deduplicated by content hash) and enqueue one chunk task per document; the job
    records the refused ones (``validate_documents``) among its failures."""
    validate_tenant(tenant)
    docs = validate_documents(items, settings.chunking.max_document_bytes,
                              max_files_bytes=settings.chunking.max_original_bytes, atomic=atomic)
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
    refused = [r.body() for r in docs.refused]
    jobs.create(job_id, "ingest", doc_ids, {"new_documents": new_docs}, files=parse, refused=refused)
    send_all(celery, [(ParseDocument if d in parse else ChunkDocument)(tenant, job_id, d) for d in doc_ids])
    return {"job_id": job_id, "documents": len(doc_ids), "new_documents": new_docs, "refused": refused}


def submit_deletion(redis, celery, tenant: str, doc_id: str) -> str:
    """Enqueue the removal of one document (a ``delete`` job: remove, then merge, cluster, report, index)."""
    job_id = new_job_id()
    JobStore(redis, tenant).create(job_id, "delete", [doc_id])
    send(celery, DeleteDocument(tenant, job_id, doc_id))
    return job_id
