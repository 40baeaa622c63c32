"""Runs the query cache warmer (``shared.infra.cache_warmup``) in a daemon thread of every worker process
that consumes the ``query`` queue. Query workers run a thread pool (``-P threads``, as in
``graphfleet up`` and docker-compose), so the queries share this process's caches; under a prefork
pool the children would keep their own caches and this warmer would not reach them. Other workers
only announce index updates."""

from __future__ import annotations

import logging
import threading

from celery.signals import worker_ready, worker_shutdown

from shared.infra.cache_warmup import CacheWarmer
from shared.infra.metrics import observe_cache_warmup
from shared.infra.queueing import QUERY, ROUTES
from workers.runtime import runtime

log = logging.getLogger(__name__)
_stop = threading.Event()


def _loop() -> None:
    rt = runtime()

    def warmed(tenant: str, seconds: float) -> None:
        observe_cache_warmup(seconds)
        log.info("query caches of tenant %s warmed in %.3f s", tenant, seconds)

    CacheWarmer(rt.redis, lambda: runtime().indexes(), on_warm=warmed, vectors=rt.vectors).run(_stop)


def install(app) -> None:
    @worker_ready.connect(weak=False)
    def _start(**_kwargs) -> None:
        if ROUTES[QUERY] not in set(app.amqp.queues.consume_from or ()):
            return
        _stop.clear()
        threading.Thread(target=_loop, name="graphfleet-cache-warmer", daemon=True).start()

    @worker_shutdown.connect(weak=False)
    def _halt(**_kwargs) -> None:
        _stop.set()
