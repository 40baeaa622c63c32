"""What a stalled job still has to do: the steps whose messages were lost, from the job's stored state.

Pure: :func:`plan_resume` reads a :class:`shared.infra.jobs.JobSnapshot` and returns the tasks to enqueue
again. Every task is idempotent (keyed writes, fan-in sets, claims), so enqueuing a step whose
message was in fact only slow costs time, never correctness; the watchdog still only calls this when
none of the job's messages is queued or in flight (see ``shared.pipeline.watchdog``).

The ingestion pipeline (``workers/ingest_tasks.py``) advances through state that this mirrors:

    docs_done < docs            -> chunk_document / delete_document per missing document
    chunks_done < chunks        -> extract_chunk per missing chunk
    no "merge" claim            -> claim it, plan_merge
    merge_batches unset         -> plan_merge
    merge batches missing       -> merge_batch per missing batch
    no "cluster" claim          -> claim it, index + cluster
    index_done unset            -> index
    report_levels unset         -> cluster
    report level i planned, batches missing -> report_batch per missing batch
    level i done                -> (claim "report{i}_next") plan_reports(i + 1)
    reports and index done      -> (claim "finalize") finalize
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from shared.infra import queueing as q
from shared.infra.jobs import TERMINAL, JobSnapshot


@dataclass(frozen=True)
class Step:
    task: str
    args: tuple = ()
    claim: str | None = None  # claim this stage (JobStore.claim_advance) before enqueuing; skip if taken
    stage: str = ""  # for logs and the resume metric

    def message_args(self, snap: JobSnapshot) -> list:
        return [snap.tenant, snap.job_id, *self.args]


def plan_resume(snap: JobSnapshot) -> list[Step]:
    if snap.status in TERMINAL:
        return []
    if snap.kind == "query":
        return [Step(q.QUERY, stage="query")]
    return _ingest_steps(snap)


def _ingest_steps(snap: JobSnapshot) -> list[Step]:
    f = snap.fields
    first = q.DELETE_DOCUMENT if snap.kind == "delete" else q.CHUNK
    if missing_docs := sorted(snap.docs - snap.docs_done):
        return [Step(first, (d,), stage="chunk") for d in missing_docs]
    if missing_chunks := sorted(snap.chunks - snap.chunks_done):
        return [Step(q.EXTRACT, (c,), stage="extract") for c in missing_chunks]
    if "merge" not in snap.flags:
        return [Step(q.PLAN_MERGE, claim="merge", stage="merge")]
    if "merge_batches" not in f:
        return [Step(q.PLAN_MERGE, stage="merge")]
    batches = int(f["merge_batches"])
    if missing := sorted(set(range(batches)) - snap.batches_done.get("merge", set())):
        return [Step(q.MERGE, (i,), stage="merge") for i in missing]
    if "cluster" not in snap.flags:
        # what _after_merge would have done; cluster recomputes even when the graph is unchanged
        return [Step(q.INDEX, claim="cluster", stage="index"), Step(q.CLUSTER, stage="cluster")]
    steps = [] if f.get("index_done") else [Step(q.INDEX, stage="index")]
    if not f.get("reports_done"):
        steps += _report_steps(snap)
    elif f.get("index_done"):
        claim = None if "finalize" in snap.flags else "finalize"
        steps.append(Step(q.FINALIZE, claim=claim, stage="finalize"))
    return steps


def _report_steps(snap: JobSnapshot) -> list[Step]:
    f = snap.fields
    if "report_levels" not in f:
        return [Step(q.CLUSTER, stage="cluster")]
    levels = json.loads(f["report_levels"])
    planned = [i for i in range(len(levels)) if f"report{i}_batches" in f]
    if not planned:
        return [Step(q.PLAN_REPORTS, (0,), stage="report")]
    i = max(planned)
    batches = int(f[f"report{i}_batches"])
    if missing := sorted(set(range(batches)) - snap.batches_done.get(f"report{i}", set())):
        return [Step(q.REPORT, (i, b), stage="report") for b in missing]
    claim = f"report{i}_next" if batches and f"report{i}_next" not in snap.flags else None
    return [Step(q.PLAN_REPORTS, (i + 1,), claim=claim, stage="report")]
