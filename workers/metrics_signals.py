"""Celery signal handlers feeding the task metrics of :mod:`shared.infra.observability.metrics`.

Outcomes: ``started`` (task_prerun), ``succeeded`` (task_postrun with state SUCCESS), ``failed``
(task_failure), ``retried`` (task_retry). Durations are observed for every run that reaches
task_postrun, whatever its state; the wait in the queue at task_prerun, from the time its message says it was
ready to run (``shared.infra.messaging.messages.READY_AT``; a message sent without it is not observed). Signals are
process-global; handlers are connected once.
"""

from __future__ import annotations

import logging
import os
import threading
import time

from celery import signals

from shared.config import get_settings
from shared.infra.jobs.store import add_job_listener
from shared.infra.messaging.messages import READY_AT
from shared.infra.observability import metrics as m
from shared.infra.observability.job_metrics import JobMetrics

log = logging.getLogger(__name__)
METRICS_PORT_ENV = "GRAPHFLEET_METRICS_PORT"  # ``Settings.metrics_port``

_started: dict[str, tuple[float, str, str]] = {}
_lock = threading.Lock()
_installed = False


def queue_of(task, request=None) -> str:
    from shared.infra.messaging.queueing import ROUTES

    name = getattr(task, "name", None) or ""
    if name in ROUTES:
        return ROUTES[name]
    req = request if request is not None else getattr(task, "request", None)
    info = getattr(req, "delivery_info", None) or {}
    return info.get("routing_key") or "unknown"


def _names(task, request=None) -> tuple[str, str]:
    return queue_of(task, request), getattr(task, "name", None) or "unknown"


def _ready_at(request) -> float | None:
    """When a task's message was ready to run (``messages.READY_AT``): a worker's request has the message's
    headers as attributes, an eagerly applied task has them in ``headers``."""
    value = getattr(request, READY_AT, None)
    if value is None:
        value = (getattr(request, "headers", None) or {}).get(READY_AT)
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def on_prerun(sender=None, task_id=None, task=None, **_kw) -> None:
    task = task or sender
    queue, name = _names(task)
    ready_at = _ready_at(getattr(task, "request", None))
    if ready_at is not None:
        m.observe_task_queue_wait(queue, name, time.time() - ready_at)
    with _lock:
        _started[task_id] = (time.perf_counter(), queue, name)
    m.record_task(queue, name, "started")
    m.metrics().tasks_in_progress.labels(queue=queue, task=name).inc()


def on_postrun(sender=None, task_id=None, task=None, state=None, **_kw) -> None:
    task = task or sender
    with _lock:
        started = _started.pop(task_id, None)
    queue, name = (started[1], started[2]) if started else _names(task)
    if started:
        m.observe_task_duration(queue, name, time.perf_counter() - started[0])
        m.metrics().tasks_in_progress.labels(queue=queue, task=name).dec()
    if state == "SUCCESS":
        m.record_task(queue, name, "succeeded")


def on_failure(sender=None, **_kw) -> None:
    queue, name = _names(sender)
    m.record_task(queue, name, "failed")


def on_retry(sender=None, request=None, **_kw) -> None:
    queue, name = _names(sender, request)
    m.record_task(queue, name, "retried")


def on_process_shutdown(pid=None, **_kw) -> None:
    m.mark_dead(pid or os.getpid())


def on_worker_init(**_kw) -> None:
    """Serve this host's aggregated metrics when ``GRAPHFLEET_METRICS_PORT`` is set (worker-only hosts)."""
    port = get_settings().metrics_port
    if not port:
        return
    try:
        m.start_metrics_server(port)
    except OSError as exc:  # port taken by a sibling worker on the same host: that one serves the host
        log.warning("metrics server on port %s not started: %s", port, exc)


def install(app=None) -> None:
    """Connect the handlers (``app`` is accepted for symmetry; Celery signals are process-global)."""
    global _installed
    if _installed:
        return
    signals.task_prerun.connect(on_prerun, weak=False, dispatch_uid="graphfleet-metrics-prerun")
    signals.task_postrun.connect(on_postrun, weak=False, dispatch_uid="graphfleet-metrics-postrun")
    signals.task_failure.connect(on_failure, weak=False, dispatch_uid="graphfleet-metrics-failure")
    signals.task_retry.connect(on_retry, weak=False, dispatch_uid="graphfleet-metrics-retry")
    signals.worker_process_shutdown.connect(on_process_shutdown, weak=False,
                                            dispatch_uid="graphfleet-metrics-pshutdown")
    signals.worker_shutdown.connect(on_process_shutdown, weak=False, dispatch_uid="graphfleet-metrics-shutdown")
    signals.worker_init.connect(on_worker_init, weak=False, dispatch_uid="graphfleet-metrics-init")
    add_job_listener(JobMetrics())  # jobs submitted/finished and chunks, from JobStore's events
    _installed = True
