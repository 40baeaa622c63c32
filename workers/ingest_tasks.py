"""Ingestion tasks. Each body loads by id, calls one ``shared.pipeline`` stage, saves, and sends what the
flow (``shared.pipeline.flow``) says comes next; the task shell (``workers.shell``) does the rest."""

from __future__ import annotations

import json
import logging

from shared.domain.models import ChunkFailure
from shared.infra.llm.client import CanceledError, LLMError, LLMUnavailable
from shared.infra.messaging import messages as m
from shared.pipeline.chunk_stage import DocumentMissing, run_chunk
from shared.pipeline.cluster_stage import run_cluster
from shared.pipeline.delete_stage import run_delete
from shared.pipeline.extract_stage import run_extract
from shared.pipeline.finalize_stage import run_finalize
from shared.pipeline.flow import MERGE, report_stage
from shared.pipeline.index_stage import run_index
from shared.pipeline.merge_stage import plan_batches, run_merge_batch, summarizer
from shared.pipeline.parse_stage import run_parse
from shared.pipeline.report_stage import plan_report_batches, run_report_batch
from workers.job import Job
from workers.llm_wait import READ, waits_for_llm
from workers.shell import INFRA_ERRORS, job_task

log = logging.getLogger(__name__)


@job_task(m.ParseDocument, mark="parse",  # a file that keeps killing its worker: a failed document, the job goes on
          give_up=lambda job, cause: job.send(*job.flow.document_parsed(job.msg.doc_id, f"parse_failed: {cause}")))
def parse_document(job: Job, msg: m.ParseDocument) -> None:
    job.send(*job.flow.document_parsed(msg.doc_id, run_parse(job.store, job.settings, msg.doc_id)))


@job_task(m.ChunkDocument, mark="chunk")
def chunk_document(job: Job, msg: m.ChunkDocument) -> None:
    try:
        pending = run_chunk(job.store, job.jobs, job.settings, msg.job_id, msg.doc_id)
    except DocumentMissing as exc:
        job.jobs.set(msg.job_id, error=str(exc))
        job.jobs.doc_chunked(msg.job_id, msg.doc_id)
        pending = []
    job.send(*(m.ExtractChunk(msg.tenant, msg.job_id, chunk_id) for chunk_id in pending))
    job.send(*job.flow.extraction_progressed())


@job_task(m.DeleteDocument, mark="delete")
def delete_document(job: Job, msg: m.DeleteDocument) -> None:
    """Remove the document, then run the ordinary merge -> cluster -> report -> index stages."""
    if job.store.document(msg.doc_id) is None and not job.jobs.get_field(msg.job_id, "delete_started"):
        job.jobs.finish(msg.job_id, "failed", error=f"document {msg.doc_id} not found")
        return
    job.jobs.set(msg.job_id, delete_started=1)  # a redelivery after a crash finishes the removal
    outcome = run_delete(job.store, job.rt.vectors, msg.doc_id)
    if outcome["found"]:
        job.jobs.set(msg.job_id, deleted=json.dumps(outcome))
    job.jobs.doc_chunked(msg.job_id, msg.doc_id)
    job.send(*job.flow.extraction_progressed())


def _chunk_gave_up(job: Job, cause: str) -> None:
    """A chunk whose task keeps failing or killing its worker is recorded as failed; the job goes on."""
    chunk_id = job.msg.chunk_id
    job.jobs.chunk_finished(job.msg.job_id, chunk_id, ChunkFailure(chunk_id=chunk_id, stage="extract",
                                                                   cause=cause[:500]))
    job.send(*job.flow.extraction_progressed())


@job_task(m.ExtractChunk, guard="active", mark="extract", give_up=_chunk_gave_up, read=READ)
@waits_for_llm
def extract_chunk(job: Job, msg: m.ExtractChunk) -> None:
    failure = None
    try:
        result = run_extract(job.store, job.settings, msg.chunk_id, job.chat("extract", cancellable=True))
        if result.warnings:
            job.jobs.record_warnings(msg.job_id, msg.chunk_id, result.warnings)
    except (CanceledError, LLMUnavailable):  # the step ends, or waits for the endpoint (``waits_for_llm``)
        raise
    except LLMError as exc:
        failure = ChunkFailure(chunk_id=msg.chunk_id, stage="extract", cause=f"llm:{exc.cause}: {exc}"[:500])
    except INFRA_ERRORS:
        raise  # Redis unreachable: the message is requeued (the shell), the chunk is not failed
    except Exception as exc:  # noqa: BLE001 - a bad chunk is recorded, never crashes the worker
        log.exception("extraction failed for %s", msg.chunk_id)
        failure = ChunkFailure(chunk_id=msg.chunk_id, stage="extract", cause=f"{type(exc).__name__}: {exc}"[:500])
    complete = job.jobs.chunk_finished(msg.job_id, msg.chunk_id, failure)
    job.send(*job.flow.extraction_progressed(complete))


@job_task(m.PlanMerge, mark="merge", read=("kind",))
def plan_merge(job: Job, msg: m.PlanMerge) -> None:
    batches = plan_batches(job.store, job.settings.merge.entities_per_task)
    job.send(*job.flow.merge_planned(batches, job.clustered_current))


@job_task(m.MergeBatch, read=(*READ, "kind"))
@waits_for_llm
def merge_batch(job: Job, msg: m.MergeBatch) -> None:
    batch, cfg = job.jobs.batch(msg.job_id, MERGE, msg.batch, default={}), job.settings
    summarize = summarizer(job.chat("summarize", model=cfg.effective_summary_model, cached=False), cfg)  # row keeps it
    run_merge_batch(job.store, batch.get("entities", []), batch.get("relations", []), cfg, summarize)
    job.send(*job.flow.merge_batch_done(msg.batch, job.clustered_current))


@job_task(m.Cluster, mark="cluster", read=("kind",))
def cluster(job: Job, msg: m.Cluster) -> None:
    with job.store.exclusive("cluster", timeout_s=job.settings.workers.task_time_limit_s):
        waves = run_cluster(job.store, job.settings, whole_due=job.reclusters)
    job.send(*job.flow.clustered(waves))


@job_task(m.PlanReports)
def plan_reports(job: Job, msg: m.PlanReports) -> None:
    wave = job.flow.wave(msg.wave)
    if wave is None:  # every wave reported
        job.store.prune_reports()  # of communities gone since the last clustering
        job.send(*job.flow.reports_finished())
        return
    number, ids = wave
    job.jobs.mark_running(msg.job_id, f"report:wave{number}")
    batches = plan_report_batches(job.store, ids, job.settings, job.rt.llm is not None)
    job.send(*job.flow.reports_planned(msg.wave, batches))


@job_task(m.ReportBatch, read=READ)
@waits_for_llm  # not an extractive report for want of an endpoint: the step waits for it
def report_batch(job: Job, msg: m.ReportBatch) -> None:
    ids = job.jobs.batch(msg.job_id, report_stage(msg.wave), msg.batch, default=[])
    outcome = run_report_batch(job.store, ids, job.settings, job.chat("report", cancellable=True))
    job.jobs.record_report_errors(msg.job_id, outcome["errors"])
    job.send(*job.flow.report_batch_done(msg.wave, msg.batch))


@job_task(m.BuildIndex, read=READ)
@waits_for_llm  # the embeddings endpoint too
def index(job: Job, msg: m.BuildIndex) -> None:
    job.jobs.mark_stage_time(msg.job_id, "index")
    run_index(job.store, job.rt.vectors, job.rt.embedder, job.context("embed"),
              synonyms=job.settings.embedding.synonym_policy())
    job.rt.announce_index_update(msg.tenant)  # query workers warm BM25 + neighbours while reports finish
    job.jobs.mark_stage_time(msg.job_id, "index_done")
    job.send(*job.flow.indexed())


@job_task(m.Finalize, guard=None)
def finalize(job: Job, msg: m.Finalize) -> None:
    job.jobs.mark_stage_time(msg.job_id, "finalize")
    status = run_finalize(job.store, job.jobs, msg.job_id)
    job.rt.announce_index_update(msg.tenant, msg.job_id)  # reports are final: the job ends once they are served warm
    job.jobs.finish(msg.job_id, status, result=json.dumps(job.store.stats()))
