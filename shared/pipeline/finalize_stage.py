"""The job's last stage: each document's status from its chunks' outcomes, and the job's."""

from __future__ import annotations

from shared.infra.jobs import JobStore
from shared.infra.store.redis_graph import GraphStore


def run_finalize(store: GraphStore, jobs: JobStore, job_id: str) -> str:
    """Mark every document of the job processed, or failed when all its chunks failed; the job's final
    status: failed when every chunk failed, else succeeded."""
    failures = {f.chunk_id for f in jobs.failures(job_id)}
    for doc in store.documents(jobs.doc_ids(job_id)).values():
        failed = [c for c in doc.chunk_ids if c in failures]
        doc.status = "failed" if doc.chunk_ids and len(failed) == len(doc.chunk_ids) else "processed"
        doc.error = f"{len(failed)} chunk(s) failed" if failed else None
        store.save_document(doc)
    total = jobs.chunk_count(job_id)
    return "failed" if total and len(failures) >= total else "succeeded"
