"""The worker-side Celery app. Configuration is applied lazily (first access), not at import."""

from __future__ import annotations

import logging
import threading

from celery import Celery
from celery.signals import worker_init, worker_process_init

from shared.config import LLMModeError, get_settings
from shared.infra import celery_patches, log_setup, tracing
from shared.infra.llm import sdk_warmup
from shared.infra.messages import warm_sender
from shared.infra.queueing import celery_config
from workers import heartbeat, lease, query_warmup, watchdog
from workers.metrics_signals import install as install_celery_signal_handlers
from workers.runtime import runtime

log = logging.getLogger(__name__)

# first of the worker_init hooks: the Celery/kombu workarounds, before the pool and the consumer exist
worker_init.connect(celery_patches.on_worker_init, weak=False)  # shared/infra/celery_patches/
app = Celery("graphfleet", include=["workers.ingest_tasks", "workers.query_tasks"])
install_celery_signal_handlers(app)  # task/process metrics (workers/metrics_signals.py)
heartbeat.install(app)  # graphfleet_queue_consumers: which queues have live consumers (workers/heartbeat.py)
lease.install(app)  # live workers renew their messages' leases: a short visibility timeout (workers/lease.py)
watchdog.install(app)  # re-enqueues the lost steps of stalled jobs (shared/pipeline/watchdog.py)
query_warmup.install(app)  # query workers rebuild a tenant's caches on index change (shared/infra/cache_warmup.py)
log_setup.install_celery(get_settings)  # GRAPHFLEET_LOG_FORMAT=json: JSON lines with job context
tracing.install_celery(get_settings)  # GRAPHFLEET_OTEL_ENABLED: task spans joined to the gateway's trace


@app.on_configure.connect
def _configure(sender, **_kwargs) -> None:
    settings = get_settings()
    sender.conf.update(celery_config(settings))  # with broker_use_ssl for a rediss:// URL


@worker_init.connect
def _refuse_silent_llm_free_mode(**_kwargs) -> None:
    """Exit before consuming when production has no LLM and GRAPHFLEET_LLM_FREE is not set (a SystemExit:
    Celery logs and swallows the other exceptions of signal handlers)."""
    try:
        get_settings().check_llm_mode()
    except LLMModeError as exc:
        raise SystemExit(f"graphfleet worker refuses to start: {exc}") from exc


@worker_init.connect
def _warm_up(**_kwargs) -> None:
    """Load every tokenizer a task may use before the first task (each BPE load is a noticeable
    amount of CPU): the chat and summary models', the embedding model's, and the default encoding; then the clients,
    Celery's result backend and, with an LLM, the OpenAI SDK (every worker: else its first task, its first
    extraction, summary, report or query call builds them)."""
    from shared.domain.tokens import get_encoding

    settings = get_settings()
    for model in {settings.llm_model, settings.effective_summary_model, settings.embedding_model, None}:
        get_encoding(model)
    try:  # the clients: their modules (the SDK's HTTP stack: heavy imports) load now, before a prefork pool
        rt = runtime()  # forks its children (each then builds its own runtime without importing them again)
    except Exception:  # noqa: BLE001 - Redis not up yet: the first task builds it
        log.warning("worker runtime not built before consuming", exc_info=True)
        return
    _warm_sender_quietly("worker")  # Celery's backend and sender, the producer's connection, the queues (thread pools)
    if rt.llm is not None:  # the SDK's lazily built request transforms and response models (CPU paid at a
        sdk_warmup.warm_openai_sdk()  # process's first call), in memory; a prefork pool's children inherit them


@worker_process_init.connect
def _warm_child(**_kwargs) -> None:
    """A prefork child (merge, cluster workers) gets a producer pool and a runtime of its own after the fork:
    connect the pool, declare the queues and build the runtime (most of its cost the LLM client's TLS context
    loading the CA bundle) now, not in the child's first task,
    which is on an ingestion's path. In a thread: the pool waits for a child's start-up at most
    ``worker_proc_alive_timeout`` (4 s), and a broker that does not answer would hold a connect longer (the child
    would be killed and forked again). A task that starts meanwhile waits for the same runtime (its lock)."""
    threading.Thread(target=_warm_child_quietly, name="warm-child", daemon=True).start()


def _warm_child_quietly() -> None:
    _warm_sender_quietly("worker child's")
    try:
        runtime()
    except Exception:  # noqa: BLE001 - Redis not reachable yet: the first task builds it
        log.warning("worker child's runtime not built before its first task", exc_info=True)


def _warm_sender_quietly(whose: str) -> None:
    try:
        warm_sender(app)
    except Exception:  # noqa: BLE001 - broker not reachable yet: the first send connects (and retries)
        log.warning("%s sender not warmed", whose, exc_info=True)
