"""The task messages: one frozen dataclass per task, built and read here only.

A message travels as Celery keyword arguments named after its fields (``send``), so a reader sees
``job_id=...`` in the broker instead of a position. The job id is always a field; what follows it
is the item the task works on (a document, a chunk, a batch, a map group), which also keys the
redelivery count (``item``). ``from_call`` still accepts the positional lists of earlier releases,
so messages queued before an upgrade are read the same way.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import ClassVar

from shared.infra import queueing as q


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


def send(celery, msg: Message, **options) -> None:
    """Enqueue ``msg`` on its task's queue (routing: ``shared.infra.queueing.ROUTES``)."""
    celery.send_task(msg.TASK, kwargs=msg.kwargs(), **options)
