"""The worker-side Celery app. Configuration is applied lazily (first access), not at import."""

from __future__ import annotations

from celery import Celery
from celery.signals import worker_init

from shared.config import get_settings
from shared.infra.queueing import celery_config
from workers import kombu_fixes, query_warmup, watchdog
from workers.metrics_signals import install as install_celery_signal_handlers

kombu_fixes.install()  # Redis restarts must not stop the consumer (see workers/kombu_fixes.py)
app = Celery("graphfleet", include=["workers.ingest_tasks", "workers.query_tasks"])
install_celery_signal_handlers(app)  # task/process metrics (workers/metrics_signals.py)
watchdog.install(app)  # re-enqueues the lost steps of stalled jobs (shared/pipeline/watchdog.py)
query_warmup.install(app)  # query workers rebuild a tenant's caches on index change (shared/infra/cache_warmup.py)


@app.on_configure.connect
def _configure(sender, **_kwargs) -> None:
    sender.conf.update(celery_config(get_settings()))


@worker_init.connect
def _warm_up(**_kwargs) -> None:
    """Load every tokenizer a task may use before the first task (each BPE load costs a few hundred ms
    of CPU): the chat and summary models', the embedding model's, and the default encoding."""
    from shared.domain.tokens import get_encoding

    settings = get_settings()
    for model in {settings.llm_model, settings.effective_summary_model, settings.embedding_model, None}:
        get_encoding(model)
