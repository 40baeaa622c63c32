"""Job metrics as a job listener (``shared.infra.jobs.store.add_job_listener``): the gateway registers it at
start-up and every worker process when its Celery signal handlers are installed (``workers.metrics_signals``),
so ``JobStore`` itself calls no metrics code."""

from __future__ import annotations

from shared.infra.observability import metrics


class JobMetrics:
    def job_submitted(self, kind: str, tier: str) -> None:
        metrics.record_job_submitted(kind, tier)

    def job_finished(self, kind: str, status: str, seconds: float | None, tier: str) -> None:
        metrics.record_job_finished(kind, status, seconds, tier)

    def chunks_finished(self, count: int, outcome: str) -> None:
        metrics.record_chunks(count, outcome)
