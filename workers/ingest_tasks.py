"""Ingestion tasks: chunk -> extract -> merge -> cluster -> report (bottom-up, in waves of subtree height)
+ index -> finalize.

Each task loads by id, calls one ``shared.pipeline`` function, saves, and enqueues the next step.
Fan-in uses Redis sets of finished items; ``JobStore.claim_advance`` lets exactly one task (or its
redelivery) start the next stage. Every task runs under ``workers.delivery.JobTask``: a redelivery
cap per (job, task, item) and an error path, so a poison chunk ends as a failed chunk and any other
escaped error or hard time limit ends the job as failed instead of leaving a barrier waiting.
"""

from __future__ import annotations

import json
import logging

from shared.domain.models import ChunkFailure
from shared.infra import queueing as q
from shared.infra.cache_warmup import announce_index_update
from shared.infra.llm.client import CanceledError, LLMError
from shared.infra.llm.usage import CallContext
from shared.pipeline.chunk_stage import DocumentMissing, run_chunk
from shared.pipeline.cluster_stage import run_cluster
from shared.pipeline.delete_stage import run_delete
from shared.pipeline.extract_stage import run_extract
from shared.pipeline.index_stage import run_index
from shared.pipeline.merge_stage import plan_batches, run_merge_batch
from shared.pipeline.report_stage import plan_report_batches, run_report_batch
from workers.celery_app import app
from workers.delivery import INFRA_ERRORS, JobTask
from workers.runtime import runtime

log = logging.getLogger(__name__)


def _open(tenant: str, job_id: str):
    """(runtime, store, jobs) for a task of ``job_id``; jobs is None when the job was canceled."""
    rt = runtime()
    jobs = rt.jobs(tenant)
    return rt, rt.store(tenant), (None if jobs.is_canceled(job_id) else jobs)


def _send(name: str, *args) -> None:
    app.send_task(name, args=list(args))


def _ctx(tenant: str, job_id: str, stage: str, queue: str) -> CallContext:
    return CallContext(tenant=tenant, stage=stage, job_id=job_id, queue=queue)


@app.task(name=q.CHUNK, bind=True, base=JobTask)
def chunk_document(self, tenant: str, job_id: str, doc_id: str) -> None:
    rt, store, jobs = _open(tenant, job_id)
    if jobs is None:
        return
    jobs.mark_running(job_id, "chunk")
    try:
        pending = run_chunk(store, jobs, rt.settings, job_id, doc_id)
    except DocumentMissing as exc:
        jobs.set(job_id, error=str(exc))
        jobs.doc_chunked(job_id, doc_id)
        pending = []
    for chunk_id in pending:
        _send(q.EXTRACT, tenant, job_id, chunk_id)
    _after_extraction(tenant, job_id, self.request.id)


@app.task(name=q.DELETE_DOCUMENT, bind=True, base=JobTask)
def delete_document(self, tenant: str, job_id: str, doc_id: str) -> None:
    """Remove the document, then run the ordinary merge -> cluster -> report -> index stages."""
    rt, store, jobs = _open(tenant, job_id)
    if jobs is None:
        return
    jobs.mark_running(job_id, "delete")
    if store.document(doc_id) is None and not jobs.get_field(job_id, "delete_started"):
        jobs.finish(job_id, "failed", error=f"document {doc_id} not found")
        return
    jobs.set(job_id, delete_started=1)  # a redelivery after a crash finishes the removal
    outcome = run_delete(store, rt.vectors, doc_id)
    if outcome["found"]:
        jobs.set(job_id, deleted=json.dumps(outcome))
    jobs.doc_chunked(job_id, doc_id)
    _after_extraction(tenant, job_id, self.request.id)


def _chunk_gave_up(tenant: str, job_id: str, item: list, cause: str, token: str) -> None:
    """A chunk whose task keeps failing or killing its worker is recorded as failed; the job goes on."""
    chunk_id = str(item[0])
    runtime().jobs(tenant).chunk_finished(job_id, chunk_id, ChunkFailure(chunk_id=chunk_id, stage="extract",
                                                                        cause=cause[:500]))
    _after_extraction(tenant, job_id, token)


@app.task(name=q.EXTRACT, bind=True, base=JobTask, give_up=staticmethod(_chunk_gave_up))
def extract_chunk(self, tenant: str, job_id: str, chunk_id: str) -> None:
    rt = runtime()
    store, jobs = rt.store(tenant), rt.jobs(tenant)
    if not jobs.mark_running(job_id, "extract"):
        return  # canceled (or already ended): no LLM call
    chat = rt.chat_fn(_ctx(tenant, job_id, "extract", "extractor"), cancel_check=lambda: jobs.canceled_recently(job_id))
    failure = None
    try:
        result = run_extract(store, rt.settings, chunk_id, chat)
        if result.warnings:
            rt.redis.hset(store.k.job(job_id) + ":warnings", chunk_id, json.dumps(result.warnings[:10]))
    except CanceledError:
        return
    except LLMError as exc:
        failure = ChunkFailure(chunk_id=chunk_id, stage="extract", cause=f"llm:{exc.cause}: {exc}"[:500])
    except INFRA_ERRORS:
        raise  # Redis unreachable: the message is requeued (JobTask), the chunk is not failed
    except Exception as exc:  # noqa: BLE001 - a bad chunk is recorded, never crashes the worker
        log.exception("extraction failed for %s", chunk_id)
        failure = ChunkFailure(chunk_id=chunk_id, stage="extract", cause=f"{type(exc).__name__}: {exc}"[:500])
    complete = jobs.chunk_finished(job_id, chunk_id, failure)
    _after_extraction(tenant, job_id, self.request.id, complete)


def _after_extraction(tenant: str, job_id: str, token: str, complete: bool | None = None) -> None:
    jobs = runtime().jobs(tenant)
    if complete is None:
        complete = jobs.extraction_complete(job_id)
    if complete and jobs.claim_advance(job_id, "merge", token):
        _send(q.PLAN_MERGE, tenant, job_id)


@app.task(name=q.PLAN_MERGE, bind=True, base=JobTask)
def plan_merge(self, tenant: str, job_id: str) -> None:
    rt, store, jobs = _open(tenant, job_id)
    if jobs is None:
        return
    jobs.mark_running(job_id, "merge")
    batches = plan_batches(store, rt.settings.merge.entities_per_task)
    pipe = rt.redis.pipeline()
    for i, batch in enumerate(batches):
        pipe.set(store.k.job_batch(job_id, "merge", i), json.dumps(batch))
    pipe.execute()
    jobs.set(job_id, merge_batches=len(batches))
    if not batches:
        _after_merge(tenant, job_id, self.request.id)
    for i in range(len(batches)):
        _send(q.MERGE, tenant, job_id, i)


@app.task(name=q.MERGE, bind=True, base=JobTask)
def merge_batch(self, tenant: str, job_id: str, index: int) -> None:
    rt, store, jobs = _open(tenant, job_id)
    if jobs is None:
        return
    batch = json.loads(rt.redis.get(store.k.job_batch(job_id, "merge", index)) or "{}")
    summarize_chat = rt.chat_fn(_ctx(tenant, job_id, "summarize", "merger"), model=rt.settings.effective_summary_model)
    summarize = None
    if summarize_chat is not None:
        from shared.domain.merge import build_summary_messages

        def summarize(name: str, fragments: list[str]) -> str:
            msgs = build_summary_messages(name, fragments, rt.settings.merge.summary_max_tokens)
            return summarize_chat(msgs, "summarize")

    try:
        run_merge_batch(store, batch.get("entities", []), batch.get("relations", []), rt.settings, summarize)
    except CanceledError:
        return
    done, total = jobs.batch_done_of(job_id, "merge", str(index), "merge_batches")
    if done >= total:
        _after_merge(tenant, job_id, self.request.id)


def _after_merge(tenant: str, job_id: str, token: str) -> None:
    rt = runtime()
    store, jobs = rt.store(tenant), rt.jobs(tenant)
    if not jobs.claim_advance(job_id, "cluster", token):
        return
    _send(q.INDEX, tenant, job_id)
    if store.graph_version() == store.clustered_version() and store.redis.exists(store.k.communities()):
        jobs.set(job_id, reports_done=1)
        _maybe_finalize(tenant, job_id, token)
    else:
        _send(q.CLUSTER, tenant, job_id)


@app.task(name=q.CLUSTER, bind=True, base=JobTask)
def cluster(self, tenant: str, job_id: str) -> None:
    rt, store, jobs = _open(tenant, job_id)
    if jobs is None:
        return
    jobs.mark_running(job_id, "cluster")
    with rt.redis.lock(store.k.lock("cluster"), timeout=rt.settings.workers.task_time_limit_s, blocking_timeout=None):
        waves = run_cluster(store, rt.settings)
    levels = [[wave, ids] for wave, ids in waves.items()]
    jobs.set(job_id, report_levels=json.dumps(levels))
    _send(q.PLAN_REPORTS, tenant, job_id, 0)


@app.task(name=q.PLAN_REPORTS, bind=True, base=JobTask)
def plan_reports(self, tenant: str, job_id: str, level_index: int) -> None:
    rt, store, jobs = _open(tenant, job_id)
    if jobs is None:
        return
    levels = json.loads(jobs.get_field(job_id, "report_levels") or "[]")
    if level_index >= len(levels):
        store.prune_reports(set(store.communities()))
        jobs.set(job_id, reports_done=1)
        _maybe_finalize(tenant, job_id, self.request.id)
        return
    wave, ids = levels[level_index]
    jobs.mark_running(job_id, f"report:wave{wave}")
    batches = plan_report_batches(store, ids, rt.settings, rt.llm is not None)
    pipe = rt.redis.pipeline()
    for i, batch in enumerate(batches):
        pipe.set(store.k.job_batch(job_id, f"report{level_index}", i), json.dumps(batch))
    pipe.execute()
    jobs.set(job_id, **{f"report{level_index}_batches": len(batches)})
    if not batches:
        _send(q.PLAN_REPORTS, tenant, job_id, level_index + 1)
    for i in range(len(batches)):
        _send(q.REPORT, tenant, job_id, level_index, i)


@app.task(name=q.REPORT, bind=True, base=JobTask)
def report_batch(self, tenant: str, job_id: str, level_index: int, index: int) -> None:
    rt, store, jobs = _open(tenant, job_id)
    if jobs is None:
        return
    stage = f"report{level_index}"
    ids = json.loads(rt.redis.get(store.k.job_batch(job_id, stage, index)) or "[]")
    chat = rt.chat_fn(_ctx(tenant, job_id, "report", "reporter"), cancel_check=lambda: jobs.canceled_recently(job_id))
    try:
        outcome = run_report_batch(store, ids, rt.settings, chat)
    except CanceledError:
        return
    if outcome["errors"]:
        rt.redis.hset(store.k.job(job_id) + ":report_errors", mapping=outcome["errors"])
    done, total = jobs.batch_done_of(job_id, stage, str(index), f"{stage}_batches")
    if done >= total and jobs.claim_advance(
        job_id, f"{stage}_next", self.request.id
    ):
        _send(q.PLAN_REPORTS, tenant, job_id, level_index + 1)


@app.task(name=q.INDEX, bind=True, base=JobTask)
def index(self, tenant: str, job_id: str) -> None:
    rt, store, jobs = _open(tenant, job_id)
    if jobs is None:
        return
    jobs.mark_stage_time(job_id, "index")
    run_index(store, rt.vectors, rt.embedder, _ctx(tenant, job_id, "embed", "indexer"))
    announce_index_update(rt.redis, tenant)  # query workers warm BM25 + neighbours while reports finish
    jobs.mark_stage_time(job_id, "index_done")
    jobs.set(job_id, index_done=1)
    _maybe_finalize(tenant, job_id, self.request.id)


def _maybe_finalize(tenant: str, job_id: str, token: str) -> None:
    jobs = runtime().jobs(tenant)
    ready = jobs.get_field(job_id, "reports_done") and jobs.get_field(job_id, "index_done")
    if ready and jobs.claim_advance(job_id, "finalize", token):
        _send(q.FINALIZE, tenant, job_id)


@app.task(name=q.FINALIZE, bind=True, base=JobTask)
def finalize(self, tenant: str, job_id: str) -> None:
    rt = runtime()
    store, jobs = rt.store(tenant), rt.jobs(tenant)
    jobs.mark_stage_time(job_id, "finalize")
    failures = {f.chunk_id for f in jobs.failures(job_id)}
    docs = store.documents(jobs.doc_ids(job_id))
    for doc in docs.values():
        failed = [c for c in doc.chunk_ids if c in failures]
        doc.status = "failed" if doc.chunk_ids and len(failed) == len(doc.chunk_ids) else "processed"
        doc.error = f"{len(failed)} chunk(s) failed" if failed else None
        store.save_document(doc)
    total = rt.redis.scard(store.k.job_chunks(job_id))
    status = "failed" if total and len(failures) >= total else "succeeded"
    announce_index_update(rt.redis, tenant)  # communities and reports are final: warm before the client reads
    jobs.finish(job_id, status, result=json.dumps(store.stats()))
