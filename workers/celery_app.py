"""The worker-side Celery app. Configuration is applied lazily (first access), not at import."""

from __future__ import annotations

from celery import Celery
from celery.signals import worker_init

from shared.config import LLMModeError, get_settings
from shared.infra.messaging import celery_patches
from shared.infra.messaging.queueing import celery_config
from shared.infra.observability import log_setup, tracing
from shared.infra.store import warmup
from workers import heartbeat, lease, watchdog_thread
from workers.metrics_signals import install as install_celery_signal_handlers
from workers.runtime import runtime


def _refuse_silent_llm_free_mode(**_kwargs) -> None:
    """Exit before consuming when production has no LLM and GRAPHFLEET_LLM_FREE is not set (a SystemExit:
    Celery logs and swallows the other exceptions of signal handlers)."""
    try:
        get_settings().check_llm_mode()
    except LLMModeError as exc:
        raise SystemExit(f"graphfleet worker refuses to start: {exc}") from exc


# the worker_init hooks run in this order: the Celery/kombu workarounds (before the pool and the consumer exist),
# the LLM-mode check, then the warm-ups
worker_init.connect(celery_patches.on_worker_init, weak=False)  # shared/infra/messaging/celery_patches/
worker_init.connect(_refuse_silent_llm_free_mode, weak=False)
app = Celery("graphfleet", include=["workers.ingest_tasks", "workers.query_tasks"])
install_celery_signal_handlers(app)  # task/process metrics (workers/metrics_signals.py)
heartbeat.install(app)  # graphfleet_queue_consumers: which queues have live consumers (workers/heartbeat.py)
lease.install(app)  # live workers renew their messages' leases: a short visibility timeout (workers/lease.py)
watchdog_thread.install(app)  # re-enqueues the lost steps of stalled jobs (shared/pipeline/watchdog.py)
log_setup.install_celery(get_settings)  # GRAPHFLEET_LOG_FORMAT=json: JSON lines with job context
tracing.install_celery(get_settings)  # GRAPHFLEET_OTEL_ENABLED: task spans joined to the gateway's trace
warmup.install(app, runtime)  # tokenizers, clients, sender; query workers' caches (shared/infra/store/warmup.py)


@app.on_configure.connect
def _configure(sender, **_kwargs) -> None:
    settings = get_settings()
    sender.conf.update(celery_config(settings))  # with broker_use_ssl for a rediss:// URL
