"""Drive the stack directly through Redis and the queues (used when no gateway URL is set)."""

from __future__ import annotations

from pathlib import Path

from graphfleet._base import collect_files as _collect
from graphfleet_cli.errors import EXIT_NOT_FOUND, CliError
from graphfleet_cli.progress import ProgressLine
from shared.config import get_settings
from shared.domain.documents import TEXT_TYPES, sniff
from shared.infra.jobs.ingest_submit import DocumentInput, InvalidDocument, decode_bytes, refused_file, submit_ingestion
from shared.infra.jobs.query_submit import submit_query
from shared.infra.jobs.status import wait_finished
from shared.infra.jobs.store import TERMINAL, JobStore
from shared.infra.messaging.queueing import make_celery, settings_for
from shared.infra.redis.conn import connect
from shared.infra.store.redis_graph import GraphStore

PROGRESS_S = 0.25  # how often ``wait(progress=True)`` redraws the progress line


def collect_files(paths: list[str]) -> list[Path]:
    """The client's collection (``graphfleet._base.collect_files``), with the CLI's exits."""
    try:
        files = _collect(paths)
    except FileNotFoundError as exc:
        raise CliError("not_found", str(exc), EXIT_NOT_FOUND) from None
    if not files:
        raise CliError("not_found", "no .txt, .md, .pdf, .html or .docx files found", EXIT_NOT_FOUND)
    return files


def file_document(path: Path) -> DocumentInput:
    """A file as a document: text as it is; a PDF, HTML or DOCX file (told by its bytes, not its name) is sent
    as it is and its text extracted by the ``parser`` workers. A file that is none of them, or not UTF-8 text, is
    kept with its reason: validation refuses it and the job names it (named by its file name, as over HTTP)."""
    data, meta = path.read_bytes(), {"path": str(path)}
    media_type = sniff(data)
    if media_type is None:
        return refused_file(path.name, "unsupported_file_type", f"{path.name}: not a text, PDF, HTML or DOCX file",
                            metadata=meta)
    if media_type in TEXT_TYPES:
        try:
            text = decode_bytes(data, path.name)
        except InvalidDocument as exc:
            return refused_file(path.name, exc.code, str(exc), metadata=meta)
        return DocumentInput(text=text, title=path.name, metadata=meta, name=path.name)
    return DocumentInput(text="", title=path.name, metadata=meta, data=data, media_type=media_type, name=path.name)


class LocalClient:
    def __init__(self, redis_url: str, broker_url: str | None = None):
        self.settings = settings_for(get_settings(), redis_url, broker_url)
        self.redis = connect(redis_url)
        self.celery = make_celery(self.settings)

    def ingest_files(self, tenant: str, files: list[Path], atomic: bool = False) -> dict:
        return submit_ingestion(self.redis, self.celery, tenant, [file_document(f) for f in files], self.settings,
                                atomic=atomic)

    def job(self, tenant: str, job_id: str) -> dict | None:
        return JobStore(self.redis, tenant).view(job_id)

    def wait(self, tenant: str, job_id: str, timeout: float = 3600.0, progress: bool = False) -> dict:
        """The job's view once it ended. Woken by its end-of-job message (``jobs.status.wait_finished``, one
        subscription for the whole wait), as the gateway's ``?wait`` is: a poll would see the end half its period
        late on average. With ``progress`` the progress line is redrawn at each status re-read (every
        ``PROGRESS_S``) meanwhile. A job that does not exist is a ``LookupError`` at once."""
        bar = ProgressLine() if progress else None

        def redraw(_status: str) -> None:
            if view := self.job(tenant, job_id):
                bar.update(view)

        jobs = JobStore(self.redis, tenant)
        ended = wait_finished(jobs, job_id, timeout, recheck_s=PROGRESS_S if bar else 0.5,
                              on_recheck=redraw if bar else None)
        view = self.job(tenant, job_id) if ended else None
        if bar:
            if view:
                bar.update(view)
            bar.close()
        if view and view["status"] in TERMINAL:
            return view
        if ended is None and not jobs.exists(job_id):
            raise LookupError(f"no job {job_id} for tenant {tenant}")
        raise TimeoutError(f"job {job_id} not finished after {timeout}s")

    def query(self, tenant: str, param, timeout: float = 300.0) -> dict:
        """Enqueue and wait for the end-of-job message; ``{"query_id", "status", "error", "result"}``
        (as the HTTP client)."""
        query_id = submit_query(self.redis, self.celery, tenant, param)
        if wait_finished(JobStore(self.redis, tenant), query_id, timeout) not in TERMINAL:
            raise TimeoutError(f"query {query_id} not finished after {timeout}s")
        view = self.job(tenant, query_id) or {}
        return {"query_id": query_id, "status": view.get("status"), "error": view.get("error"),
                "result": view.get("result") or {}}

    def stats(self, tenant: str) -> dict:
        return GraphStore(self.redis, tenant).stats()

    def store(self, tenant: str) -> GraphStore:
        return GraphStore(self.redis, tenant)

    def export_graphml(self, tenant: str) -> bytes:
        from shared.infra.store.graph_export import graphml_bytes

        return graphml_bytes(self.store(tenant))

    def close(self) -> None:
        self.redis.close()


def ingest_summary(view: dict, stats: dict, seconds: float) -> dict:
    usage = view["usage"]
    return {
        "job_id": view["id"],
        "status": view["status"],
        **stats,
        "job_documents": view["progress"]["documents"],
        "job_chunks": view["progress"]["chunks_total"],
        "failed_chunks": view["failures"],
        "refused": [f for f in view["failures"] if f.get("stage") == "validate"],
        "llm_calls": usage["calls"],
        "prompt_tokens": usage["prompt_tokens"],
        "completion_tokens": usage["completion_tokens"],
        "cost_usd": usage["cost_usd"],
        "usage_by_stage": usage["by_stage"],
        "seconds": round(seconds, 3),
    }
