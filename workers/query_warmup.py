"""Runs the query cache warmer (``shared.infra.cache_warmup``) in a daemon thread of every worker process
that consumes the ``query`` queue. Query workers run a thread pool (``-P threads``, as in
``graphfleet up`` and docker-compose), so the queries share this process's caches; under a prefork
pool the children would keep their own caches and this warmer would not reach them. Other workers
only announce index updates.

Before such a worker consumes (``worker_init``), it readies what every query uses whatever its tenant (the BM25
library's import, a Redis connection, a keep-alive connection to the LLM API, the embedder probe when another
process already ran it; Celery's backend and the OpenAI SDK's lazily built models are warmed in every worker,
``workers.celery_app._warm_up``) and the tenants whose index changed most recently, as far as the cache has room
and for at most ``START_WARM_S`` (``shared.infra.cache_warmup``): a worker that reports ready answers its first
query warm."""

from __future__ import annotations

import logging
import threading
import time

from celery.signals import worker_init, worker_ready, worker_shutdown

from shared.domain.retrieval import bm25
from shared.infra.cache_warmup import CacheWarmer, recent_announcements
from shared.infra.llm.usage import CallContext
from shared.infra.lru import CACHED_TENANTS
from shared.infra.metrics import observe_cache_warmup, prime_query_series
from shared.infra.queueing import QUERY, ROUTES
from shared.infra.tiers import TIERS
from workers.runtime import runtime

log = logging.getLogger(__name__)
_stop = threading.Event()
_prepared: dict[str, float] = {}  # tenant -> the announcement its caches were warmed after, before consuming


START_WARM_S = 5.0  # before consuming, recent tenants are warmed for at most this long (the rest: in the background)


_probing = threading.Lock()  # one embedder probe at a time in this process


def _probe_embedder(tenant: str) -> None:
    """Whether the embedder only sees words (``Runtime.lexical_embedder``; on a new deployment's first index one
    20-word embedding call, booked to ``tenant`` as its first query's would be, then known to every process), in
    a thread of its own: the warmer goes on to the next announcement (a job's final one, which the job's end waits
    for) without waiting an API round trip."""
    if not _probing.acquire(blocking=False):
        return

    def probe() -> None:
        try:
            runtime().lexical_embedder(CallContext(tenant=tenant, stage="embed", queue=ROUTES[QUERY]))
        finally:
            _probing.release()

    threading.Thread(target=probe, name="graphfleet-embedder-probe", daemon=True).start()


def _warmed(tenant: str, seconds: float) -> None:
    """After a tenant's caches: the embedder probe (``_probe_embedder``), and, with an LLM, the metric series its
    next answer writes, created at zero (``prime_query_series``)."""
    observe_cache_warmup(seconds)
    log.info("query caches of tenant %s warmed in %.3f s", tenant, seconds)
    _probe_embedder(tenant)
    rt = runtime()
    if rt.llm is not None:
        prime_query_series(rt.settings.llm_model, ROUTES[QUERY], QUERY, {tenant: TIERS.tier(rt.redis, tenant)})


def _warmer(rt, warm_recent: int = 0, warmed: dict[str, float] | None = None) -> CacheWarmer:
    return CacheWarmer(rt.redis, lambda: runtime().indexes(), on_warm=_warmed, vectors=rt.vectors,
                       model=rt.settings.llm_model, warm_recent=warm_recent, warmed=warmed)


def _prepare() -> None:
    """Before the worker consumes (``worker_init``): the clients and the most recent tenants, so that
    a worker reported ready answers its first query warm. Best effort: a failure only leaves it cold."""
    started = time.monotonic()
    try:
        bm25.preload()
        rt = runtime()
        rt.warm_clients()
        if rt.llm is not None:
            rt.llm.preconnect()
        warmer = _warmer(rt)
        for tenant, announced in recent_announcements(rt.redis, CACHED_TENANTS).items():
            if time.monotonic() - started > START_WARM_S:
                break
            if warmer.handle(tenant):
                _prepared[tenant] = announced
        if _probing.acquire(timeout=START_WARM_S):  # a probe started above ends before the worker consumes
            _probing.release()
    except Exception:  # noqa: BLE001 - Redis not up yet: the background warmer and the first query catch up
        log.warning("query worker warm-up before consuming failed", exc_info=True)


def _loop() -> None:
    """The background warmer: index updates, and once the recent tenants that ``_prepare`` did not warm or that
    were announced again since."""
    _warmer(runtime(), warm_recent=CACHED_TENANTS, warmed=_prepared).run(_stop)


def install(app) -> None:
    @worker_init.connect(weak=False)
    def _before_consuming(**_kwargs) -> None:
        if ROUTES[QUERY] in set(app.amqp.queues.consume_from or ()):
            _prepare()

    @worker_ready.connect(weak=False)
    def _start(**_kwargs) -> None:
        if ROUTES[QUERY] not in set(app.amqp.queues.consume_from or ()):
            return
        _stop.clear()
        threading.Thread(target=_loop, name="graphfleet-cache-warmer", daemon=True).start()

    @worker_shutdown.connect(weak=False)
    def _halt(**_kwargs) -> None:
        _stop.set()
