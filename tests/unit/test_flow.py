"""The declared flows: the worker path (``Flow``, ``QueryFlow``) and the resume path (``plan_resume``) agree.

Whole jobs run through ``shared.pipeline.flow.Flow`` over an in-memory job state, the way the worker
tasks drive it. Then every message of the run is lost once: the job stalls, ``plan_resume`` must send
that very message again (or the planner that re-creates it), and the job must still end exactly once.
Queries run the same way through ``QueryFlow``, with time: the deadline is a countdown message, so a lost
message is either sent again by the resume, exactly it, or left to the deadline. A stage added to a
declaration but not to one of the two paths fails here.
"""

from __future__ import annotations

import importlib
from collections import deque

import pytest

from shared.infra.jobs.store import JobSnapshot
from shared.infra.messaging.messages import (
    MESSAGES,
    BuildIndex,
    ChunkDocument,
    Cluster,
    DeleteDocument,
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
from shared.infra.messaging.queueing import ROUTES
from shared.pipeline.flow import INGEST, QUERY, Flow, QueryFlow
from shared.pipeline.resume import plan_resume


class MemoryJob:
    """``FlowState`` in memory, plus the snapshot the watchdog would read."""

    def __init__(self, kind: str, docs: list[str], files: list[str]):
        self.kind = kind
        self.docs_files, self.docs_parsed = set(files), set()  # uploaded as files: parsed first
        self.fields: dict[str, str] = {"kind": kind, "status": "running"}
        self.flags: dict[str, str] = {}
        self.docs, self.docs_done = set(docs), set()
        self.chunks: set[str] = set()
        self.chunks_done: set[str] = set()
        self.batches_done: dict[str, set[int]] = {}
        self.finalized = 0

    def claim_advance(self, job_id, stage, token):
        return self.flags.setdefault(stage, token) == token

    def get_field(self, job_id, field):
        return self.fields.get(field)

    def set(self, job_id, **fields):
        self.fields.update({k: str(v) for k, v in fields.items()})

    def doc_parsed(self, job_id, doc_id, error=None):
        self.docs_parsed.add(doc_id)
        if error is not None:
            self.docs_done.add(doc_id)

    def extraction_complete(self, job_id):
        return self.docs_done >= self.docs and self.chunks <= self.chunks_done

    def plan_batches(self, job_id, stage, payloads, total_field):
        self.fields[total_field] = str(len(payloads))

    def batch_done_of(self, job_id, stage, batch, total_field):
        done = self.batches_done.setdefault(stage, set())
        done.add(int(batch))
        return len(done), int(self.fields.get(total_field, 0))

    def snapshot(self) -> JobSnapshot:
        return JobSnapshot(tenant="acme", job_id="job-1", fields=dict(self.fields), docs=set(self.docs),
                           docs_done=set(self.docs_done), docs_files=set(self.docs_files),
                           docs_parsed=set(self.docs_parsed),
                           chunks=set(self.chunks), chunks_done=set(self.chunks_done),
                           flags=dict(self.flags), batches_done={k: set(v) for k, v in self.batches_done.items()})


class Scenario:
    def __init__(self, kind="ingest", docs=2, chunks_per_doc=2, merge_batches=2, waves=((2, 1), (0,), (1,)),
                 clustered_current=False, files=0, bad_files=0):
        self.kind, self.docs, self.chunks_per_doc = kind, [f"d{i}" for i in range(docs)], chunks_per_doc
        self.files = self.docs[:files]  # uploaded as files (PDF, HTML, DOCX): parsed first
        self.bad_files = set(self.files[:bad_files])  # files that yield no text (encrypted, scanned, a zip bomb)
        self.merge_batches, self.waves, self.clustered_current = merge_batches, waves, clustered_current


def _chunked(job: MemoryJob, sc: Scenario, flow: Flow, msg: ChunkDocument | DeleteDocument) -> list[Message]:
    new = [] if isinstance(msg, DeleteDocument) else [f"{msg.doc_id}-c{i}" for i in range(sc.chunks_per_doc)]
    job.chunks |= set(new)
    job.docs_done.add(msg.doc_id)
    return [ExtractChunk(msg.tenant, msg.job_id, c) for c in new] + flow.extraction_progressed()


def _parsed(job: MemoryJob, sc: Scenario, flow: Flow, msg: ParseDocument) -> list[Message]:
    return flow.document_parsed(msg.doc_id, "encrypted_pdf: ..." if msg.doc_id in sc.bad_files else None)


def _extracted(job: MemoryJob, sc: Scenario, flow: Flow, msg: ExtractChunk) -> list[Message]:
    job.chunks_done.add(msg.chunk_id)
    return flow.extraction_progressed()


def _plan_reports(job: MemoryJob, sc: Scenario, flow: Flow, msg: PlanReports) -> list[Message]:
    if flow.wave(msg.wave) is None:
        return flow.reports_finished()
    return flow.reports_planned(msg.wave, [[i] for i in range(sc.waves[msg.wave][0])])


def _finalized(job: MemoryJob, sc: Scenario, flow: Flow, msg: Finalize) -> list[Message]:
    job.finalized += 1
    job.fields["status"] = "succeeded"
    return []


WORKERS = {  # what the worker task of each message does, at the level of the flow (stores left out)
    ParseDocument: _parsed,
    ChunkDocument: _chunked,
    DeleteDocument: _chunked,
    ExtractChunk: _extracted,
    PlanMerge: lambda job, sc, flow, msg: flow.merge_planned([{"entities": [i]} for i in range(sc.merge_batches)],
                                                             lambda: sc.clustered_current),
    MergeBatch: lambda job, sc, flow, msg: flow.merge_batch_done(msg.batch, lambda: sc.clustered_current),
    Cluster: lambda job, sc, flow, msg: flow.clustered({w: [f"c{w}-{i}" for i in range(len(sizes))]
                                                        for w, sizes in enumerate(sc.waves)}),
    PlanReports: _plan_reports,
    ReportBatch: lambda job, sc, flow, msg: flow.report_batch_done(msg.wave, msg.batch),
    BuildIndex: lambda job, sc, flow, msg: flow.indexed(),
    Finalize: _finalized,
}


def work(job: MemoryJob, sc: Scenario, msg: Message, token: str) -> list[Message]:
    return WORKERS[type(msg)](job, sc, Flow(job, msg.tenant, msg.job_id, token), msg)


def first_messages(sc: Scenario, job: MemoryJob) -> list[Message]:
    if sc.kind == "recluster":  # as shared.pipeline.recluster.submit_due starts it: no document, the merge planner
        return Flow(job, "acme", "job-1", "recluster").extraction_progressed(complete=True)
    if sc.kind == "delete":
        return [DeleteDocument("acme", "job-1", d) for d in sc.docs]
    return [(ParseDocument if d in sc.files else ChunkDocument)("acme", "job-1", d) for d in sc.docs]


def run(sc: Scenario, lose: int | None = None) -> tuple[MemoryJob, list[Message], Message | None, list]:
    """Deliver every message FIFO; the ``lose``-th delivery is dropped. When the queue runs dry before the
    job ended, resume as the watchdog does (claims first, then send). Returns the job, the deliveries,
    the lost message and the first resume's messages."""
    job = MemoryJob(sc.kind, sc.docs, files=sc.files)
    queue: deque[Message] = deque(first_messages(sc, job))
    delivered: list[Message] = []
    lost, resumed, sweeps = None, [], 0
    while job.fields["status"] == "running":
        if not queue:
            sweeps += 1
            assert sweeps <= 3, f"the job never ends: {job.snapshot()}"
            for step in plan_resume(job.snapshot()):
                if step.claim and not job.claim_advance("job-1", step.claim, f"watchdog:{sweeps}"):
                    break
                queue.append(step.message(job.snapshot()))
                if sweeps == 1:
                    resumed.append(queue[-1])
            assert queue, f"stalled and nothing to resume: {job.snapshot()}"
            continue
        msg = queue.popleft()
        if lose is not None and len(delivered) == lose and lost is None:
            lost = msg
            delivered.append(msg)
            continue
        delivered.append(msg)
        queue.extend(work(job, sc, msg, token=f"task-{len(delivered)}"))
    return job, delivered, lost, resumed


SCENARIOS = {
    "ingest": Scenario(),
    "graph-unchanged": Scenario(clustered_current=True),
    "no-merge-batches": Scenario(merge_batches=0),
    "empty-wave": Scenario(waves=((1,), (0,), (2, 1))),
    "delete": Scenario(kind="delete", docs=1),
    "recluster": Scenario(kind="recluster", docs=0),
    "one-of-each": Scenario(docs=1, chunks_per_doc=1, merge_batches=1, waves=((1,),)),
    "files-and-texts": Scenario(docs=3, files=2),
    "a-bad-file-among-good-ones": Scenario(docs=3, files=2, bad_files=1),
    "every-file-bad": Scenario(docs=2, files=2, bad_files=2),
}


@pytest.mark.parametrize("name", SCENARIOS)
def test_a_job_runs_every_declared_stage_once_and_ends_once(name):
    sc = SCENARIOS[name]
    job, delivered, _, resumed = run(sc)
    assert job.finalized == 1 and resumed == []
    kinds = {type(m) for m in delivered}
    expected = {s.message for s in INGEST} | {s.planner for s in INGEST if s.planner}
    if not sc.files:
        expected -= {ParseDocument}
    if sc.kind == "delete":
        expected = (expected - {ChunkDocument, ExtractChunk}) | {DeleteDocument}
    if sc.kind == "recluster":
        expected -= {ChunkDocument, ExtractChunk}
    if sc.files and sc.bad_files == set(sc.docs):
        expected -= {ChunkDocument, ExtractChunk}
    if sc.clustered_current:
        expected -= {Cluster, PlanReports, ReportBatch}
    if sc.merge_batches == 0:
        expected -= {MergeBatch}
    assert kinds == expected


@pytest.mark.parametrize("name", SCENARIOS)
def test_every_lost_message_is_sent_again_by_the_resume_and_the_job_still_ends_once(name):
    sc = SCENARIOS[name]
    _, delivered, _, _ = run(sc)
    for k in range(len(delivered)):
        job, _, lost, resumed = run(sc, lose=k)
        assert lost is not None
        assert job.finalized == 1, (k, lost)
        assert lost in resumed, (k, lost, resumed)


def test_every_declared_message_has_a_queue_and_a_worker_task():
    from workers.celery_app import app

    for module in ("workers.ingest_tasks", "workers.query_tasks"):
        importlib.import_module(module)
    for name, cls in MESSAGES.items():
        assert name == cls.TASK and name in ROUTES, name
        assert name in app.tasks, f"no worker task for {name}"
    for stage in (*INGEST, *QUERY):
        assert stage.message.TASK in MESSAGES and (stage.planner is None or stage.planner.TASK in MESSAGES)


def test_messages_round_trip_by_field_name_and_read_positional_lists_of_earlier_releases():
    msg = ReportBatch("acme", "job-1", 2, 5)
    assert msg.kwargs() == {"tenant": "acme", "job_id": "job-1", "wave": 2, "batch": 5}
    assert ReportBatch.from_call((), msg.kwargs()) == msg == ReportBatch.from_call(["acme", "job-1", 2, 5], {})
    assert msg.item() == "2:5" and Finalize("acme", "job-1").item() == "-"


# ---- queries: the answer task, the map fan-out, the reduce, the deadline

STALL = 10  # ticks without a delivery, and no message in the watchdog's sight, before it resumes the query


class MemoryQuery:
    """A query's ``FlowState`` in memory, the map groups that answered, its ends (partial or not) and snapshot."""

    def __init__(self):
        self.fields: dict[str, str] = {"kind": "query", "status": "running"}
        self.flags: dict[str, str] = {}
        self.answered: set[int] = set()
        self.ended: list[bool] = []

    def claim_advance(self, job_id, stage, token):
        return self.flags.setdefault(stage, token) == token

    def get_field(self, job_id, field):
        return self.fields.get(field)

    def set(self, job_id, **fields):
        self.fields.update({k: str(v) for k, v in fields.items()})

    def end(self, groups: int) -> list:
        self.ended.append(len(self.answered) < groups)  # partial: a group had not answered
        self.fields["status"] = "succeeded"
        return []

    def snapshot(self) -> JobSnapshot:
        return JobSnapshot(tenant="acme", job_id="qry-1", fields=dict(self.fields), flags=dict(self.flags),
                           batches_done={"map": set(self.answered)} if self.answered else {})


class QueryScenario:
    def __init__(self, groups=3, deadline=100, slow=(), dropped=()):
        self.groups = groups  # map groups planned; 0: answered in the query task (not global, direct, one group)
        self.deadline = deadline  # ticks from the fan-out to the deadline
        self.slow = set(slow)  # groups whose map call outlasts the deadline
        self.dropped = set(dropped)  # groups whose map message of the fan-out never arrives


def _answer(job: MemoryQuery, sc: QueryScenario, flow: QueryFlow, msg: RunQuery, now: int) -> list:
    """(message, delay in ticks, in the watchdog's sight) sent by the query task."""
    if not sc.groups:
        return job.end(0)
    maps, deadline = flow.map_planned(sc.groups, sc.deadline, now)
    # a slow map is held by its worker; the countdown is out of sight (RabbitMQ's delay exchanges; on Redis a
    # worker holds it, and the watchdog then waits for the deadline, as for any message in flight)
    return [(m, sc.deadline + 1 if m.group in sc.slow else 0, True) for m in maps if m.group not in sc.dropped] \
        + [(deadline, sc.deadline, False)]


def _mapped(job: MemoryQuery, sc: QueryScenario, flow: QueryFlow, msg: GlobalMap, now: int) -> list:
    job.answered.add(msg.group)
    return [(m, 0, True) for m in flow.map_answered(len(job.answered), sc.groups)]


QUERY_WORKERS = {
    RunQuery: _answer,
    GlobalMap: _mapped,
    GlobalReduce: lambda job, sc, flow, msg, now: job.end(sc.groups),
    QueryDeadline: lambda job, sc, flow, msg, now: job.end(sc.groups) if flow.deadline_passed() else [],
}


def run_query(sc: QueryScenario, lose: int | None = None) -> tuple[MemoryQuery, list[Message], Message | None, list]:
    """Deliver the messages in the order they are due, one tick each; the ``lose``-th delivery is dropped.
    When nothing is due and nothing is in sight, the watchdog resumes the query ``STALL`` ticks later,
    unless a countdown comes first. Returns the query, the deliveries, the lost message and the first
    resume's messages."""
    job = MemoryQuery()
    pending = [(0, 0, RunQuery("acme", "qry-1"), True)]  # (due, order sent, message, in sight)
    now, sent, delivered, lost, resumed, sweeps = 0, 1, [], None, [], 0
    while job.fields["status"] == "running":
        ready = [p for p in pending if p[0] <= now]
        if not ready:
            due = min((p[0] for p in pending), default=None)
            if any(p[3] for p in pending) or (due is not None and due <= now + STALL):
                now = due
                continue
            now, sweeps = now + STALL, sweeps + 1
            assert sweeps <= 3, f"the query never ends: {job.snapshot()}"
            for step in plan_resume(job.snapshot(), now):
                if step.claim and not job.claim_advance("qry-1", step.claim, f"watchdog:{sweeps}"):
                    break
                pending.append((now, sent, step.message(job.snapshot()), True))
                sent += 1
                if sweeps == 1:
                    resumed.append(pending[-1][2])
            assert any(p[0] <= now for p in pending), f"stalled and nothing to resume: {job.snapshot()}"
            continue
        item = min(ready)
        pending.remove(item)
        delivered.append(item[2])
        if lose is not None and len(delivered) == lose + 1 and lost is None:
            lost = item[2]
        else:
            flow = QueryFlow(job, "acme", "qry-1", f"task-{len(delivered)}")
            for msg, delay, seen in QUERY_WORKERS[type(item[2])](job, sc, flow, item[2], now):
                pending.append((now + delay, sent, msg, seen))
                sent += 1
        now += 1
    return job, delivered, lost, resumed


QUERY_SCENARIOS = {
    "answered-in-the-query-task": QueryScenario(groups=0),
    "map-then-reduce": QueryScenario(),  # the deadline is far: a stalled query is resumed before it
    "a-group-outlasts-the-deadline": QueryScenario(slow={2}, deadline=5),
    "a-map-message-lost-before-the-deadline": QueryScenario(dropped={1}, deadline=5),
}


@pytest.mark.parametrize("name", QUERY_SCENARIOS)
def test_a_query_runs_its_declared_stages_and_ends_once(name):
    sc = QUERY_SCENARIOS[name]
    job, delivered, _, resumed = run_query(sc)
    cut_short = bool(sc.slow or sc.dropped)
    assert resumed == [] and job.ended == [cut_short]
    expected = {RunQuery} | ({GlobalMap, QueryDeadline if cut_short else GlobalReduce} if sc.groups else set())
    assert {type(m) for m in delivered} == expected


@pytest.mark.parametrize("name", QUERY_SCENARIOS)
def test_a_lost_query_message_is_sent_again_exactly_or_left_to_the_deadline(name):
    sc = QUERY_SCENARIOS[name]
    _, delivered, _, _ = run_query(sc)
    for k in range(len(delivered)):
        job, _, lost, resumed = run_query(sc, lose=k)
        assert lost is not None and len(job.ended) == 1, (k, lost)
        if resumed:
            assert resumed == [lost], (k, lost, resumed)
        else:  # the deadline reduced without the lost group, or the slow group answered without the lost deadline
            assert isinstance(lost, (GlobalMap, QueryDeadline)), (k, lost)
            assert job.ended == [isinstance(lost, GlobalMap)], (k, lost)


def test_each_query_message_lost_once_is_sent_again_by_the_resume():
    resent = set()
    for sc in QUERY_SCENARIOS.values():
        for k in range(len(run_query(sc)[1])):
            _, _, lost, resumed = run_query(sc, lose=k)
            if resumed == [lost]:
                resent.add(type(lost))
    assert resent == {stage.message for stage in QUERY}
