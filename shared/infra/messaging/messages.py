"""The task messages: one frozen dataclass per task, built and read here only.

A message travels as Celery keyword arguments named after its fields (``send``), so a reader sees
``job_id=...`` in the broker instead of a position. The job id is always a field; what follows it
is the item the task works on (a document, a chunk, a batch, a map group), which also keys the
redelivery count (``item``). ``from_call`` still accepts the positional lists of earlier releases,
so messages queued before an upgrade are read the same way.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, fields
from typing import ClassVar

from shared.infra.messaging import queueing as q

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Message:
    TASK: ClassVar[str] = ""
    tenant: str
    job_id: str

    @classmethod
    def from_call(cls, args: tuple | list, kwargs: dict) -> Message:
        return cls(*args, **kwargs)

    def kwargs(self) -> dict:
        return asdict(self)

    def args(self) -> list:
        """The fields in order (logs, tests)."""
        return [getattr(self, f.name) for f in fields(self)]

    def item(self) -> str:
        """What this message works on within its job ("-" for a whole-job step): ``":"``-joined fields
        after the job id."""
        return ":".join(str(v) for v in self.args()[2:]) or "-"


MESSAGES: dict[str, type[Message]] = {}


def message(task: str):
    def register(cls):
        cls = dataclass(frozen=True)(cls)
        cls.TASK = task
        MESSAGES[task] = cls
        return cls

    return register


# ---- ingestion (shared/pipeline/flow.py declares how they follow each other)
@message(q.PARSE)
class ParseDocument(Message):
    doc_id: str


@message(q.CHUNK)
class ChunkDocument(Message):
    doc_id: str


@message(q.DELETE_DOCUMENT)
class DeleteDocument(Message):
    doc_id: str


@message(q.EXTRACT)
class ExtractChunk(Message):
    chunk_id: str


@message(q.PLAN_MERGE)
class PlanMerge(Message):
    pass


@message(q.MERGE)
class MergeBatch(Message):
    batch: int


@message(q.INDEX)
class BuildIndex(Message):
    pass


@message(q.CLUSTER)
class Cluster(Message):
    pass


@message(q.PLAN_REPORTS)
class PlanReports(Message):
    wave: int


@message(q.REPORT)
class ReportBatch(Message):
    wave: int
    batch: int


@message(q.FINALIZE)
class Finalize(Message):
    pass


# ---- queries (the job id is the query id)
@message(q.QUERY)
class RunQuery(Message):
    pass


@message(q.GLOBAL_MAP)
class GlobalMap(Message):
    group: int


@message(q.GLOBAL_REDUCE)
class GlobalReduce(Message):
    pass


@message(q.QUERY_DEADLINE)
class QueryDeadline(Message):
    pass


# a message header: when it was ready to run (``time.time()``): its publish, or when its countdown or eta ends; the
# workers observe ``graphfleet_task_queue_wait_seconds`` from it
READY_AT = "graphfleet_ready_at"
REPR_MAX = 1024  # Celery's own bound on a message's argument reprs (``amqp.argsrepr_maxsize``)
# messages per publish batch: each batch is flushed once, so a broker error costs a resend of this many at most
BATCH_MESSAGES = 500


def send(celery, msg: Message, **options) -> None:
    """Enqueue ``msg`` on its task's queue (routing: ``shared.infra.messaging.queueing.ROUTES``). The reprs that logs
    and monitors show are given, not left to Celery's ``saferepr``: a message's fields are short ids, and that
    recursive repr was a sizeable share of a send's CPU for nothing. The message carries when it
    is ready to run (header ``READY_AT``, epoch seconds: now, or when its ``countdown`` or ``eta`` (an aware
    datetime, as Celery wants) comes): the worker observes its wait in the queue at its start."""
    kwargs = msg.kwargs()
    eta = options.get("eta")
    ready_at = eta.timestamp() if eta is not None else time.time() + float(options.get("countdown") or 0)
    headers = {**(options.pop("headers", None) or {}), READY_AT: ready_at}
    celery.send_task(msg.TASK, kwargs=kwargs, headers=headers, **_reprs(kwargs), **options)


def _reprs(kwargs: dict) -> dict:
    """The reprs of a message's arguments that logs and monitors show (there are no positional ones)."""
    return {"argsrepr": "()", "kwargsrepr": repr(kwargs)[:REPR_MAX]}


def send_all(celery, messages: Sequence[Message], **options) -> None:
    """Enqueue ``messages`` (a fan-out: a job's chunks, merge or report batches, a query's map groups). Over a
    Redis broker they go in one pipeline: kombu's publish batch (``Producer.batch``) buffers each LPUSH and
    flushes them together, instead of a new client and a round trip per message, which roughly halves a
    message's CPU. A broker without batches (AMQP) publishes each at once, as before. The
    batch's flush is not under Celery's publish retry, so when it fails on a broker error that batch's messages
    are sent again one by one, each with its retries; a message the failed flush had delivered is then delivered
    twice, which every task takes (a redelivery, as after a lost acknowledgement). A fan-out of more than
    ``BATCH_MESSAGES`` goes in several batches, each flushed once, so a failure resends one batch, not those
    already flushed."""
    if len(messages) < 2:
        for msg in messages:
            send(celery, msg, **options)
        return
    for start in range(0, len(messages), BATCH_MESSAGES):
        _send_batch(celery, messages[start:start + BATCH_MESSAGES], **options)


def _send_batch(celery, messages: Sequence[Message], **options) -> None:
    with celery.producer_or_acquire() as producer:
        errors = producer.connection.connection_errors + producer.connection.channel_errors
        try:
            with producer.batch(max_size=2 * len(messages)):  # flushed once, at the end (one LPUSH per message)
                for msg in messages:
                    send(celery, msg, producer=producer, **options)
            return
        except errors as exc:
            log.warning("a batch of %d messages was not published (%s): sending them one by one", len(messages), exc)
    for msg in messages:
        send(celery, msg, **options)

