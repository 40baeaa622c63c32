"""What a stalled job still has to do: the steps whose messages were lost, from the job's stored state.

Pure: :func:`plan_resume` walks the declared flow (``shared.pipeline.flow.INGEST``) over a
:class:`shared.infra.jobs.JobSnapshot`: a stage whose ``waits_for`` are done contributes the steps it
is missing (its unfinished documents or chunks, its planner, its missing batches, its one task) and is
done when nothing is missing. Every task is idempotent (keyed writes, fan-in sets, claims), so
enqueuing a step whose message was in fact only slow costs time, never correctness; the watchdog still
only calls this when none of the job's messages is queued or in flight (see ``shared.pipeline.watchdog``).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass

from shared.infra.jobs import TERMINAL, JobSnapshot
from shared.infra.messages import DeleteDocument, Message, RunQuery
from shared.pipeline.flow import INGEST, REPORT_WAVES, Stage, batches_field, next_claim, report_stage


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


def plan_resume(snap: JobSnapshot) -> list[Step]:
    if snap.status in TERMINAL:
        return []
    if snap.kind == "query":
        return [Step(RunQuery, stage="query")]
    steps: list[Step] = []
    done: dict[str, bool] = {}
    claimed: set[str] = set()  # a claim shared by stages started together goes with the first one's step
    for stage in INGEST:
        if not all(done[w] for w in stage.waits_for):
            done[stage.name] = False
            continue
        if stage.claim and stage.claim not in snap.flags:
            claim = None if stage.claim in claimed else stage.claim
            missing = [Step(stage.planner or stage.message, claim=claim, stage=stage.name)]
            claimed.add(stage.claim)
        else:
            missing = _MISSING[stage.fan_out](stage, snap)
        done[stage.name] = not missing
        steps += missing
    return steps


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
