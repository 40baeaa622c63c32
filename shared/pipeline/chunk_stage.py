"""Chunk one document; report which chunks still need extraction."""

from __future__ import annotations

from shared.domain.chunking import chunk_document
from shared.domain.documents.markers import page_spans, pages_in_span, pages_of
from shared.domain.models import Chunk
from shared.domain.query.row_counts import source_body, stored_counts
from shared.infra.jobs.store import JobStore
from shared.infra.store.redis_graph import GraphStore


class DocumentMissing(LookupError):
    pass


def run_chunk(store: GraphStore, jobs: JobStore, settings, job_id: str, doc_id: str) -> list[str]:
    """Chunk ``doc_id`` (idempotent). Returns chunk ids of this document without an extraction yet."""
    doc = store.document(doc_id)
    text = store.document_text(doc_id)
    if doc is None or text is None:
        raise DocumentMissing(f"document {doc_id} not found for tenant {store.tenant}")
    chunks = chunk_document(text, doc_id, settings.chunking, settings.llm_model)
    spans = page_spans(text)
    if spans:  # a paged document (PDF): each chunk keeps the pages it quotes, for citations
        chunks = [c.model_copy(update={"pages": _chunk_pages(text, spans, c)}) for c in chunks]
    # each chunk's source row counted once, here, for every query that packs it (``row_counts``)
    counts = stored_counts([source_body(c.text) for c in chunks], settings.llm_model)
    chunks = [c.model_copy(update={"row_tokens": n, "row_digest": d}) for c, (n, d) in zip(chunks, counts, strict=True)]
    store.put_chunks(chunks)  # new chunks are marked for embedding in the same atomic step
    chunk_ids = list(dict.fromkeys(c.id for c in chunks))
    if doc.chunk_ids != chunk_ids or doc.status == "pending" or doc.page_spans != spans:
        doc.chunk_ids = chunk_ids
        doc.page_spans = spans  # the page boundaries a sentence's pages are read from at query time
        doc.status = "processing"
        store.save_document(doc)
    jobs.add_chunks(job_id, chunk_ids)
    done = store.extracted(chunk_ids)
    for cid in chunk_ids:
        if cid in done:
            jobs.chunk_finished(job_id, cid)
    pending = [cid for cid in chunk_ids if cid not in done]
    jobs.doc_chunked(job_id, doc_id)
    return pending


def _chunk_pages(text: str, spans: list[tuple[int, int, int]], chunk: Chunk) -> list[int]:
    """The pages of the chunk's own span; a chunk cut without one is found by its text."""
    if chunk.start is None or chunk.end is None:
        return pages_of(text, chunk.text)
    return pages_in_span(spans, chunk.start, chunk.end)
