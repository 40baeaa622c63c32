"""What a task body works with (``workers.shell`` builds it per delivery): the job's stores and flow,
its LLM call context, and sending the next messages."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from functools import cached_property

from shared.infra.jobs.query_state import QueryStore
from shared.infra.jobs.store import TERMINAL, JobStore
from shared.infra.messaging.messages import Message, send_all
from shared.infra.messaging.queueing import ROUTES
from shared.infra.store.embedder_record import EmbedderMismatch, checked_embed
from shared.infra.store.redis_graph import GraphStore
from shared.infra.tenancy.usage import CallContext
from shared.pipeline.finalize_stage import fail_documents
from shared.pipeline.flow import Flow, QueryFlow
from shared.pipeline.recluster import KIND as RECLUSTER
from shared.pipeline.recluster import clustered_current
from workers.celery_app import app
from workers.runtime import Runtime

log = logging.getLogger(__name__)


@dataclass
class Job:
    """What a task body works with: the job's stores and flow, bound to this delivery."""

    rt: Runtime
    msg: Message
    token: str  # the task id: a redelivery of the same message may claim again
    worker: str = ""
    fields: dict[str, str | None] = field(default_factory=dict)  # job fields read at admission (``job_task(read=)``)

    @property
    def settings(self):
        return self.rt.settings

    @cached_property
    def jobs(self) -> JobStore:
        return self.rt.jobs(self.msg.tenant)

    @cached_property
    def store(self) -> GraphStore:
        return self.rt.store(self.msg.tenant)

    @cached_property
    def queries(self) -> QueryStore:
        return self.rt.queries(self.msg.tenant)

    @cached_property
    def flow(self) -> Flow:
        return Flow(self.jobs, self.msg.tenant, self.msg.job_id, self.token)

    @cached_property
    def query_flow(self) -> QueryFlow:
        return QueryFlow(self.jobs, self.msg.tenant, self.msg.job_id, self.token)

    def context(self, stage: str) -> CallContext:
        """The LLM call context of this task: usage is booked to the job, the stage and the task's queue."""
        return CallContext(tenant=self.msg.tenant, stage=stage, job_id=self.msg.job_id,
                           queue=ROUTES.get(self.msg.TASK, "unknown"))

    def chat(self, stage: str, model: str | None = None, cancellable: bool = False, cached: bool = True):
        """``chat(messages, stage) -> text`` for this job, or None without an LLM; ``cancellable`` checks for
        a cancel (at most twice a second) before every call. Answers are capped at the stage's configured
        ``Settings.answer_cap`` (none by default); ``cached=False`` bypasses the LLM answer cache."""
        cancel_check = (lambda: self.jobs.canceled_recently(self.msg.job_id)) if cancellable else None
        return self.rt.chat_fn(self.context(stage), model=model, cancel_check=cancel_check,
                               max_tokens=self.settings.answer_cap(stage), cached=cached)

    @property
    def reclusters(self) -> bool:
        """A ``recluster`` job (``shared.pipeline.recluster``; the kind read at admission: ``job_task(read=)``)."""
        return self.fields.get("kind") == RECLUSTER

    def clustered_current(self) -> bool:
        """Whether the job may skip its cluster stage (``shared.pipeline.recluster.clustered_current``)."""
        return clustered_current(self.store, self.fields.get("kind"), self.settings)

    def embed(self, ctx: CallContext):
        """A query's ``embed(texts)`` with the runtime's embedder, refused (:class:`EmbedderMismatch`) when the
        tenant's vectors are another embedder's (``shared.infra.store.embedder_record``)."""
        return checked_embed(self.store, self.rt.vectors, self.rt.embedder, ctx)

    def fail_query(self, exc: Exception) -> None:
        """End a query ``failed`` with ``exc``: a refusal in its own words (``embedder_mismatch: ...``), any other
        error logged with its traceback and named by its type."""
        if isinstance(exc, EmbedderMismatch):
            log.info("query %s refused: %s", self.msg.job_id, exc)
            self.fail(str(exc))
            return
        log.exception("query %s failed", self.msg.job_id)
        self.fail(f"{type(exc).__name__}: {exc}")

    def stream(self, event: str, data: dict) -> None:
        """A stream event of this query for its followers (``GET /v1/queries/{id}/events``); best effort."""
        self.queries.publish(self.msg.job_id, event, data)

    def send(self, *messages: Message, **options) -> None:
        send_all(app, messages, **options)

    def fail(self, cause: str) -> None:
        """End the job ``failed`` with ``cause``; first its documents still in progress end ``failed`` with the
        same cause, so none stays ``processing`` after its job. A job that already ended keeps its end."""
        if self.jobs.status(self.msg.job_id) in TERMINAL:
            return
        fail_documents(self.store, self.jobs, self.msg.job_id, cause)
        self.jobs.finish(self.msg.job_id, "failed", error=cause[:500])


def fail_job(job: Job, cause: str) -> None:
    """The default ``give_up``: the job ends failed with the task's name and the cause."""
    job.fail(f"{job.msg.TASK.rsplit('.', 1)[-1]}: {cause}")
