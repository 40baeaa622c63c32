"""The job's last stage: each document's status from its chunks' outcomes, and the job's."""

from __future__ import annotations

from shared.infra.jobs.store import JobStore
from shared.infra.store.redis_graph import GraphStore


def run_finalize(store: GraphStore, jobs: JobStore, job_id: str) -> str:
    """Mark every document of the job processed, or failed when all its chunks failed; the job's final
    status: failed when every chunk failed (or every document's file failed to parse), else succeeded. A
    document whose file could not be parsed keeps its failed status and cause (``run_parse``)."""
    failures = {f.chunk_id for f in jobs.failures(job_id)}
    unparsed, doc_ids = jobs.document_failures(job_id), jobs.doc_ids(job_id)
    for doc in store.documents(d for d in doc_ids if d not in unparsed).values():
        failed = [c for c in doc.chunk_ids if c in failures]
        doc.status = "failed" if doc.chunk_ids and len(failed) == len(doc.chunk_ids) else "processed"
        doc.error = f"{len(failed)} chunk(s) failed" if failed else None
        store.save_document(doc)
    total = jobs.chunk_count(job_id)
    every_doc_unparsed = bool(unparsed) and len(unparsed) >= len(doc_ids)
    return "failed" if (total and len(failures) >= total) or every_doc_unparsed else "succeeded"


def fail_documents(store: GraphStore, jobs: JobStore, job_id: str, cause: str) -> list[str]:
    """The job failed before its last stage: each of its documents still ``pending`` or ``processing`` ends
    ``failed`` with ``cause`` (one already processed, by an earlier job, keeps its status). Returns their ids."""
    doc_ids = jobs.doc_ids(job_id)
    if not doc_ids:  # a query, or a job without documents
        return []
    docs = [d for d in store.documents(doc_ids).values() if d.status in ("pending", "processing")]
    for doc in docs:
        doc.status, doc.error = "failed", cause[:500]
        store.save_document(doc)
    return sorted(d.id for d in docs)
