"""Extract the text of a document uploaded as a file (PDF, HTML, DOCX) and store it as the document's text.

The parsers are pure (``shared.domain.documents``); this stage reads the file kept with the document, stores the
text the chunker reads, and, when the file yields no text (encrypted, a scan, a zip bomb, malformed), marks
the document failed with the cause and returns it: the task records it on the job and the job goes on."""

from __future__ import annotations

import logging

from shared.domain.documents import ParseError, extract_text, sniff
from shared.infra.jobs.ingest_submit import clean_text
from shared.infra.store.redis_graph import GraphStore

log = logging.getLogger(__name__)


def run_parse(store: GraphStore, settings, doc_id: str) -> str | None:
    """Parse ``doc_id``'s file (idempotent: a document that has its text already is left alone).
    None when the document has its text; else the cause (``code: message``) it has none."""
    doc = store.document(doc_id)
    if doc is None:
        return f"document_missing: document {doc_id} not found for tenant {store.tenant}"
    if store.document_text(doc_id) is not None:
        return None
    data = store.original(doc_id)
    if data is None:
        return f"file_missing: document {doc_id} has neither text nor an uploaded file"
    media_type = doc.metadata.get("media_type") or sniff(data) or "unknown"
    try:
        text = clean_text(extract_text(data, media_type, max_chars=settings.chunking.max_document_bytes))
    except ParseError as exc:
        cause = f"{exc.code}: {exc}"
    except Exception as exc:  # noqa: BLE001 - a file the library chokes on is a bad document, not a crash
        log.warning("parsing %s (%s) failed", doc_id, media_type, exc_info=True)
        cause = f"parse_failed: {type(exc).__name__}: {exc}"
    else:
        store.set_document_text(doc_id, text)
        return None
    doc.status, doc.error = "failed", cause[:500]
    store.save_document(doc)
    return doc.error
