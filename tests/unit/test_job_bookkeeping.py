"""An ended job's per-chunk bookkeeping expires (``jobs.bookkeeping_ttl_s``); its view stays as it was."""

from __future__ import annotations

from shared.config import get_settings
from shared.domain.models import ChunkFailure
from shared.infra.jobs.store import JobStore


def _run_a_job(jobs: JobStore, job_id: str) -> None:
    jobs.create(job_id, "ingest", ["d1", "d2"], files=["d2"])
    jobs.mark_running(job_id, "extract")
    jobs.doc_chunked(job_id, "d1")
    jobs.add_chunks(job_id, ["c1", "c2", "c3"])
    jobs.admit(job_id, "extract", "c1", 5)
    jobs.chunk_finished(job_id, "c1")
    jobs.chunk_finished(job_id, "c2", ChunkFailure(chunk_id="c2", stage="extract", cause="bad"))
    jobs.record_warnings(job_id, "c1", ["odd"])
    jobs.plan_batches(job_id, "merge", [{"entities": ["A"]}, {"entities": ["B"]}], "merge_batches")
    jobs.batch_done_of(job_id, "merge", "0", "merge_batches")
    jobs.claim_advance(job_id, "cluster", "task-1")


def test_an_ended_jobs_bookkeeping_expires_and_its_view_is_unchanged(redis_client, tenant):
    jobs = JobStore(redis_client, tenant)
    _run_a_job(jobs, "job-1")
    prefix = jobs.k.job("job-1")
    before = set(redis_client.scan_iter(match=f"{prefix}*"))
    assert jobs.finish("job-1", "succeeded", result={"chunks": 3})
    view = jobs.view("job-1")
    assert "ended_counts" not in view
    assert view["progress"] == {"documents": 2, "documents_chunked": 1, "chunks_total": 3, "chunks_done": 1,
                                "chunks_failed": 1, "stage": "done"}
    ttl = get_settings().jobs.bookkeeping_ttl_s
    expiring = {k for k in redis_client.scan_iter(match=f"{prefix}*") if redis_client.ttl(k) > 0}
    assert all(0 < redis_client.ttl(k) <= ttl for k in expiring)
    kept = {k.decode().removeprefix(prefix) for k in before - expiring}
    assert kept == {"", ":failures", ":stages"}  # the job, its failures and stage times: what the view shows
    assert {jobs.k.job_chunks("job-1").encode(), jobs.k.job_batch("job-1", "merge", 1).encode(),
            jobs.k.job_stage_done("job-1", "merge").encode(), jobs.k.deliveries("job-1").encode()} <= expiring
    redis_client.delete(*expiring)  # as their expiry will
    assert jobs.view("job-1") == view
    assert not jobs.finish("job-1", "failed")  # ended once: a late end changes nothing
    assert jobs.view("job-1") == view


def test_a_canceled_job_records_its_counts_too(redis_client, tenant):
    jobs = JobStore(redis_client, tenant)
    _run_a_job(jobs, "job-2")
    assert jobs.cancel("job-2")
    view = jobs.view("job-2")
    redis_client.delete(jobs.k.job_chunks("job-2"), jobs.k.job_chunks_done("job-2"), jobs.k.job_docs_done("job-2"))
    assert jobs.view("job-2") == view
    assert view["progress"]["chunks_total"] == 3 and view["status"] == "canceled"


def test_a_done_batchs_payload_is_deleted_at_once_and_a_late_redelivery_reads_an_empty_batch(redis_client, tenant):
    jobs = JobStore(redis_client, tenant)
    jobs.create("job-3", "ingest", ["d1"])
    jobs.plan_batches("job-3", "merge", [{"entities": ["A"]}, {"entities": ["B"]}], "merge_batches")
    assert jobs.batch_done_of("job-3", "merge", "0", "merge_batches") == (1, 2)
    assert not redis_client.exists(jobs.k.job_batch("job-3", "merge", 0))
    assert jobs.batch("job-3", "merge", 0, default={}) == {}
    assert jobs.batch("job-3", "merge", 1, default={}) == {"entities": ["B"]}
