"""The flows, declared once: their stages in order, what each fans out over, what it waits for, the
claim that lets exactly one task start it, and the job fields it writes.

Ingestion (:data:`INGEST`)::

    parse (per uploaded file) -> chunk ...
    chunk (per document) -> extract (per chunk) -> merge (planned batches) -+-> index ----------+-> finalize
                                                                            +-> cluster -> report (per wave,
                                                                                planned batches) -+

A query (:data:`QUERY`; the job id is the query id)::

    query -+-> (ended: answered in the query task, the direct answer of a global query included)
           +-> map (per group) -> reduce          (the last group to answer starts the reduce)
           +-> deadline ------------^              (or the deadline does, with the groups that answered: partial)

Two readers use the declarations and nothing else:

* the workers advance a job through :class:`Flow` (``workers/ingest_tasks.py``) or :class:`QueryFlow`
  (``workers/query_tasks.py``): each task reports what it finished and sends the messages the flow returns;
* the watchdog's :func:`shared.pipeline.resume.plan_resume` walks the job's flow over its stored state
  and returns the steps whose messages were lost.

``tests/unit/test_flow.py`` runs whole jobs and queries through the flows, loses every message once, and
checks that ``plan_resume`` sends it again, so a stage cannot be added to one path only.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from shared.infra.messaging.messages import (
    BuildIndex,
    ChunkDocument,
    Cluster,
    ExtractChunk,
    Finalize,
    GlobalMap,
    GlobalReduce,
    MergeBatch,
    Message,
    ParseDocument,
    PlanMerge,
    PlanReports,
    QueryDeadline,
    ReportBatch,
    RunQuery,
)

# job fields
MERGE_BATCHES = "merge_batches"  # how many merge batches were planned
REPORT_WAVES = "report_waves"  # json [[wave, [community ids]], ...]: reports bottom-up, a wave after its children's
REPORTS_DONE = "reports_done"  # every wave reported (or the graph did not change since the last clustering)
INDEX_DONE = "index_done"
# claims (``JobStore.claim_advance``): the one task that starts what follows
CLAIM_MERGE = "merge"
CLAIM_CLUSTER = "cluster"  # starts index and cluster together
CLAIM_FINALIZE = "finalize"
MERGE = "merge"  # the batch stage of merge; each report wave is its own batch stage, ``report_stage(wave)``


def report_stage(wave: int) -> str:
    return f"report{wave}"


def batches_field(stage: str) -> str:
    """The job field counting the batches planned for a batch stage ("merge" -> "merge_batches")."""
    return f"{stage}_batches"


def next_claim(stage: str) -> str:
    """The claim of the task that starts what follows a batch stage (the next report wave)."""
    return f"{stage}_next"


@dataclass(frozen=True)
class Stage:
    name: str
    message: type[Message]  # the task doing one unit of the stage
    fan_out: str  # "files" | "documents" | "chunks" | "batches" | "waves" | "once" | "timer"
    waits_for: tuple[str, ...] = ()  # stages that must be done before it starts
    claim: str | None = None  # taken by the one task that starts the stage (shared by stages started together)
    planner: type[Message] | None = None  # plans the batches of "batches" / "waves" stages
    done_field: str | None = None  # the job field written when the stage is done
    skipped_by: str | None = None  # a job field that, once set, means the stage has nothing left to do
    # a "timer" stage: sent with the fan-out it bounds, it fires at the time in the job field ``due_field`` and
    # then starts the stage ``starts`` (taking its claim) even though what that stage waits for is not done
    due_field: str | None = None
    starts: str | None = None


INGEST: tuple[Stage, ...] = (
    Stage("parse", ParseDocument, "files"),  # documents uploaded as files; texts are parsed at submission
    Stage("chunk", ChunkDocument, "documents", waits_for=("parse",)),  # DeleteDocument for a delete job
    Stage("extract", ExtractChunk, "chunks", waits_for=("chunk",)),
    Stage("merge", MergeBatch, "batches", waits_for=("extract",), claim=CLAIM_MERGE, planner=PlanMerge),
    Stage("index", BuildIndex, "once", waits_for=("merge",), claim=CLAIM_CLUSTER, done_field=INDEX_DONE),
    Stage("cluster", Cluster, "once", waits_for=("merge",), claim=CLAIM_CLUSTER, done_field=REPORT_WAVES,
          skipped_by=REPORTS_DONE),  # the graph did not change since the communities were computed
    Stage("report", ReportBatch, "waves", waits_for=("cluster",), planner=PlanReports, done_field=REPORTS_DONE),
    Stage("finalize", Finalize, "once", waits_for=("index", "report"), claim=CLAIM_FINALIZE),
)
STAGES = {stage.name: stage for stage in INGEST}

# the query's job fields and claim
MAP = "map"  # the batch stage of a global query: its map groups (``batches_field(MAP)`` counts them)
DEADLINE_AT = "deadline_at"  # when the deadline fires (epoch seconds), set with the map fan-out
CLAIM_REDUCE = "reduce"
DEADLINE_TOKEN = "deadline"  # the deadline claims the reduce with this token, whatever its task id (see QueryFlow)

QUERY: tuple[Stage, ...] = (
    # answered in the query task: local, naive, hybrid, causal and graph queries, and a global query that needs no
    # map phase (only its context asked for, no LLM, no report selected, the selected reports fit one call: the
    # direct answer, or a single map group run here); else the task plans the map groups and fans them out
    Stage("query", RunQuery, "once", done_field=batches_field(MAP)),
    Stage("map", GlobalMap, "batches", waits_for=("query",)),  # one LLM call per group, on the map_analyst queue
    # sent with the map fan-out, due ``deadline_s`` later: when the map has not finished by then it starts the
    # reduce itself, with the groups that answered (the result is partial and names the groups that did not)
    Stage("deadline", QueryDeadline, "timer", waits_for=("query",), due_field=DEADLINE_AT, starts="reduce"),
    Stage("reduce", GlobalReduce, "once", waits_for=("map",), claim=CLAIM_REDUCE),  # started by the last group
)


class FlowState(Protocol):
    """What the flow reads and writes of a job (``shared.infra.jobs.store.JobStore``; an in-memory one in tests)."""

    def claim_advance(self, job_id: str, stage: str, token: str) -> bool: ...

    def get_field(self, job_id: str, field: str) -> str | None: ...

    def set(self, job_id: str, **fields) -> None: ...

    def extraction_complete(self, job_id: str) -> bool: ...

    def doc_parsed(self, job_id: str, doc_id: str, error: str | None = None) -> None: ...

    def plan_batches(self, job_id: str, stage: str, payloads: list, total_field: str) -> None: ...

    def batch_done_of(self, job_id: str, stage: str, batch: str, total_field: str) -> tuple[int, int]: ...


class _JobFlow:
    def __init__(self, state: FlowState, tenant: str, job_id: str, token: str):
        self.state, self.tenant, self.job_id, self.token = state, tenant, job_id, token

    def _claim(self, claim: str) -> bool:
        return self.state.claim_advance(self.job_id, claim, self.token)


class Flow(_JobFlow):
    """One ingestion job's transitions (:data:`INGEST`), for the task holding ``token`` (its task id: a
    redelivery may claim again). Every method records what finished and returns the messages to send next
    (often none)."""

    # parse -> chunk
    def document_parsed(self, doc_id: str, error: str | None = None) -> list[Message]:
        """The document's text was extracted from its file (chunk it), or could not be (``error``): the
        document is recorded as failed and counts as chunked, so the job goes on without it."""
        self.state.doc_parsed(self.job_id, doc_id, error)
        if error is not None:
            return self.extraction_progressed()
        return [ChunkDocument(self.tenant, self.job_id, doc_id)]

    # chunk -> extract -> merge
    def extraction_progressed(self, complete: bool | None = None) -> list[Message]:
        """A document was chunked (or deleted) or a chunk extracted; merge starts once all are."""
        if complete is None:
            complete = self.state.extraction_complete(self.job_id)
        return [PlanMerge(self.tenant, self.job_id)] if complete and self._claim(CLAIM_MERGE) else []

    def merge_planned(self, batches: list, clustered_current: Callable[[], bool]) -> list[Message]:
        self.state.plan_batches(self.job_id, MERGE, batches, batches_field(MERGE))
        if not batches:
            return self.merge_finished(clustered_current)
        return [MergeBatch(self.tenant, self.job_id, i) for i in range(len(batches))]

    def merge_batch_done(self, batch: int, clustered_current: Callable[[], bool]) -> list[Message]:
        done, total = self.state.batch_done_of(self.job_id, MERGE, str(batch), batches_field(MERGE))
        return self.merge_finished(clustered_current) if done >= total else []

    def merge_finished(self, clustered_current: Callable[[], bool]) -> list[Message]:
        """Index and cluster start together; clustering is skipped when the graph did not change since the
        communities were computed (``clustered_current``), and then the reports are already done."""
        if not self._claim(CLAIM_CLUSTER):
            return []
        out: list[Message] = [BuildIndex(self.tenant, self.job_id)]
        if clustered_current():
            self.state.set(self.job_id, **{REPORTS_DONE: 1})
            return out + self._maybe_finalize()
        return out + [Cluster(self.tenant, self.job_id)]

    # cluster -> report waves
    def clustered(self, waves: dict[int, list[str]]) -> list[Message]:
        self.state.set(self.job_id, **{REPORT_WAVES: json.dumps([[w, ids] for w, ids in waves.items()])})
        return [PlanReports(self.tenant, self.job_id, 0)]

    def wave(self, wave: int) -> tuple[int, list[str]] | None:
        """(wave number, community ids) of the ``wave``-th report wave; None past the last."""
        waves = json.loads(self.state.get_field(self.job_id, REPORT_WAVES) or "[]")
        return tuple(waves[wave]) if wave < len(waves) else None

    def reports_planned(self, wave: int, batches: list) -> list[Message]:
        stage = report_stage(wave)
        self.state.plan_batches(self.job_id, stage, batches, batches_field(stage))
        if not batches:
            return [PlanReports(self.tenant, self.job_id, wave + 1)]
        return [ReportBatch(self.tenant, self.job_id, wave, i) for i in range(len(batches))]

    def report_batch_done(self, wave: int, batch: int) -> list[Message]:
        stage = report_stage(wave)
        done, total = self.state.batch_done_of(self.job_id, stage, str(batch), batches_field(stage))
        if done >= total and self._claim(next_claim(stage)):
            return [PlanReports(self.tenant, self.job_id, wave + 1)]
        return []

    def reports_finished(self) -> list[Message]:
        self.state.set(self.job_id, **{REPORTS_DONE: 1})
        return self._maybe_finalize()

    # index, finalize
    def indexed(self) -> list[Message]:
        self.state.set(self.job_id, **{INDEX_DONE: 1})
        return self._maybe_finalize()

    def _maybe_finalize(self) -> list[Message]:
        ready = all(self.state.get_field(self.job_id, STAGES[s].done_field) for s in STAGES["finalize"].waits_for)
        return [Finalize(self.tenant, self.job_id)] if ready and self._claim(CLAIM_FINALIZE) else []


class QueryFlow(_JobFlow):
    """A global query's map phase (:data:`QUERY`), for the task holding ``token``; the query task either ends
    the query (its result saved) or plans the map groups. Needs ``claim_advance`` and ``set`` of
    :class:`FlowState`."""

    def map_planned(self, groups: int, deadline_s: float, now: float) -> tuple[list[Message], Message]:
        """The map fan-out, one message per group, and the deadline, to be sent due ``deadline_s`` from ``now``;
        the group count and the due time are recorded first, so a resume knows both."""
        self.state.set(self.job_id, stage="map", **{batches_field(MAP): groups, DEADLINE_AT: now + deadline_s})
        return [GlobalMap(self.tenant, self.job_id, g) for g in range(groups)], QueryDeadline(self.tenant, self.job_id)

    def map_answered(self, answered: int, groups: int) -> list[Message]:
        """A group answered (or failed, which counts as answered with nothing); the last one starts the reduce."""
        return [GlobalReduce(self.tenant, self.job_id)] if answered >= groups and self._claim(CLAIM_REDUCE) else []

    def deadline_passed(self) -> bool:
        """The deadline came: whether the reduce is still to start, in which case the deadline's task reduces now
        with the groups that answered. The claim's token is the stage's, not the task's: every deadline message
        of the query (a redelivery, one sent again by the watchdog) counts as the same deadline."""
        return self.state.claim_advance(self.job_id, CLAIM_REDUCE, DEADLINE_TOKEN)
