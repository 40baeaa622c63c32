"""What a stalled job still has to do: the steps whose messages were lost, from the job's stored state.

Pure: :func:`plan_resume` walks the job's declared flow (``shared.pipeline.flow.INGEST``, or ``QUERY`` for a
query) over a :class:`shared.infra.jobs.store.JobSnapshot`: a stage whose ``waits_for`` are done contributes the
steps it is missing (its unfinished documents or chunks, its planner, its missing batches or map groups, its
one task) and is done when nothing is missing. A timer (a query's deadline) past its due time while the stage
it starts is unclaimed was lost with the rest: it is sent again, and what it cuts short is not. Every task is
idempotent (keyed writes, fan-in sets, claims), so enqueuing a step whose message was in fact only slow costs
time, never correctness; the watchdog still only calls this when none of the job's messages is queued or in
flight (see ``shared.pipeline.watchdog``).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass

from shared.infra.jobs.store import TERMINAL, JobSnapshot
from shared.infra.messaging.messages import DeleteDocument, Message
from shared.pipeline.flow import INGEST, QUERY, REPORT_WAVES, Stage, batches_field, next_claim, report_stage


@dataclass(frozen=True)
class Step:
    message_type: type[Message]
    args: tuple = ()  # the message's fields after the job id
    claim: str | None = None  # claim this (JobStore.claim_advance) before enqueuing; skip if taken
    stage: str = ""  # for logs and the resume metric

    @property
    def task(self) -> str:
        return self.message_type.TASK

    def message(self, snap: JobSnapshot) -> Message:
        return self.message_type(snap.tenant, snap.job_id, *self.args)

    def message_args(self, snap: JobSnapshot) -> list:
        return self.message(snap).args()


def plan_resume(snap: JobSnapshot, now: float | None = None) -> list[Step]:
    """The steps to enqueue again, in flow order; ``now`` (epoch seconds) tells whether a timer is past due."""
    if snap.status in TERMINAL:
        return []
    flow = QUERY if snap.kind == "query" else INGEST
    by_name = {stage.name: stage for stage in flow}
    now = time.time() if now is None else now
    # once a stage a timer may start is claimed (by the timer, or by the last of what it waits for), what it
    # waits for is over, finished or not
    over = {w for t in flow if t.starts and by_name[t.starts].claim in snap.flags for w in by_name[t.starts].waits_for}
    steps: list[Step] = []
    done: dict[str, bool] = {}
    claimed: set[str] = set()  # a claim shared by stages started together goes with the first one's step
    for stage in flow:
        if not all(done[w] for w in stage.waits_for):
            done[stage.name] = False
            continue
        if stage.name in over:
            done[stage.name] = True
            continue
        if stage.fan_out == "timer":
            missing = _timer(stage, by_name[stage.starts], snap, now)
            cut = set(by_name[stage.starts].waits_for) if missing else set()
            steps = [s for s in steps if s.stage not in cut]  # what the timer cuts short is not asked again
        elif stage.claim and stage.claim not in snap.flags:
            claim = None if stage.claim in claimed else stage.claim
            missing = [Step(stage.planner or stage.message, claim=claim, stage=stage.name)]
            claimed.add(stage.claim)
        else:
            missing = _MISSING[stage.fan_out](stage, snap)
        done[stage.name] = not missing
        steps += missing
    return steps


def _timer(stage: Stage, starts: Stage, snap: JobSnapshot, now: float) -> list[Step]:
    """The timer, to fire at once, when its due time has passed and the stage it starts is not claimed yet (it
    would have been by the timer firing): its message was lost. Before its due time it is left alone (queued
    with its countdown, or lost: then what it bounds finishes without it)."""
    due = snap.fields.get(stage.due_field)
    if due is None or now < float(due) or starts.claim in snap.flags:
        return []
    return [Step(stage.message, stage=stage.name)]


def _items(stage: Stage, items: set[str], finished: set[str]) -> list[Step]:
    return [Step(stage.message, (i,), stage=stage.name) for i in sorted(items - finished)]


def _documents(stage: Stage, snap: JobSnapshot) -> list[Step]:
    steps = _items(stage, snap.docs, snap.docs_done)
    return [Step(DeleteDocument, s.args, stage=s.stage) for s in steps] if snap.kind == "delete" else steps


def _files(stage: Stage, snap: JobSnapshot) -> list[Step]:
    """Documents uploaded as files whose text is not extracted yet (a text document, or a delete job, has none)."""
    return _items(stage, snap.docs_files, snap.docs_parsed)


def _chunks(stage: Stage, snap: JobSnapshot) -> list[Step]:
    return _items(stage, snap.chunks, snap.chunks_done)


def _batches(stage: Stage, snap: JobSnapshot, name: str = "", planner_args: tuple = ()) -> list[Step]:
    """The planner when the batches were not planned, else the batches not done."""
    name = name or stage.name
    total = snap.fields.get(batches_field(name))
    if total is None:
        return [Step(stage.planner, planner_args, stage=stage.name)]
    finished = snap.batches_done.get(name, set())
    return [Step(stage.message, (*planner_args, b), stage=stage.name)
            for b in sorted(set(range(int(total))) - finished)]


def _once(stage: Stage, snap: JobSnapshot) -> list[Step]:
    """The stage's one task unless its done field (or the field that skips it) is set; the last stage has
    no done field: the job is not terminal, so it still has to run."""
    f = snap.fields
    if (stage.done_field and f.get(stage.done_field)) or (stage.skipped_by and f.get(stage.skipped_by)):
        return []
    return [Step(stage.message, stage=stage.name)]


def _waves(stage: Stage, snap: JobSnapshot) -> list[Step]:
    """Report waves run one after the other: the last planned wave's missing batches, else the next wave."""
    if snap.fields.get(stage.done_field):
        return []
    waves = json.loads(snap.fields.get(REPORT_WAVES) or "[]")
    planned = [w for w in range(len(waves)) if batches_field(report_stage(w)) in snap.fields]
    if not planned:
        return [Step(stage.planner, (0,), stage=stage.name)]
    wave = max(planned)
    if missing := _batches(stage, snap, report_stage(wave), (wave,)):
        return missing
    claim = next_claim(report_stage(wave))
    batches = int(snap.fields[batches_field(report_stage(wave))])
    return [Step(stage.planner, (wave + 1,), claim=claim if batches and claim not in snap.flags else None,
                 stage=stage.name)]


_MISSING: dict[str, Callable[[Stage, JobSnapshot], list[Step]]] = {
    "files": _files, "documents": _documents, "chunks": _chunks, "batches": _batches, "once": _once, "waves": _waves,
}
