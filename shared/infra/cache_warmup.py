"""Query caches warmed when a tenant's index changes, so the first query after an ingestion does not
pay for them.

A query worker process keeps per-tenant read caches: BM25 indexes over entities and chunks, the
embedded store's vector matrices, the neighbour lists, and the parsed communities and reports. Each is
keyed by a version the writers bump, so after an ingestion the next query would rebuild them (on a large
index, most of a second). The ingestion pipeline announces each change on a pub/sub channel (the tenant
id only); every query worker process listens and rebuilds that tenant's caches in the background, for
tenants it already caches or while it has room for more (warming never evicts another tenant).

Warming is a read of what the query would read anyway and is idempotent: a missed or repeated
announcement costs at most one cold query or one cache hit.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from shared.infra.keys import index_updated_channel
from shared.infra.redis_conn import to_str
from shared.infra.store.bm25_cache import BM25Cache
from shared.infra.store.redis_graph import GraphStore

log = logging.getLogger(__name__)


def announce_index_update(redis, tenant: str) -> None:
    """Tell every query worker that ``tenant``'s index changed (best effort: a lost message only
    leaves the next query cold)."""
    try:
        redis.publish(index_updated_channel(), tenant)
    except Exception:  # noqa: BLE001 - an announcement must never fail the pipeline step that made it
        log.warning("could not announce the index update of tenant %s", tenant, exc_info=True)


def warm_tenant(redis, tenant: str, bm25: BM25Cache, vectors=None) -> float:
    """Build the tenant's stale query caches in this process; seconds spent. ``vectors``: the process's
    vector store, warmed when it keeps a local copy (the embedded store's matrices; Weaviate keeps none)."""
    started = time.perf_counter()
    store = GraphStore(redis, tenant)
    bm25.warm(tenant)
    warm_vectors = getattr(vectors, "warm", None)
    if warm_vectors is not None:
        warm_vectors(tenant)
    store.adjacency()
    store.communities()
    return time.perf_counter() - started


class CacheWarmer:
    """Listens for index updates and warms this process's caches; ``run`` blocks until ``stop`` is set
    (a daemon thread of each query worker process). Survives Redis restarts by resubscribing."""

    def __init__(self, redis, bm25: Callable[[], BM25Cache], on_warm: Callable[[str, float], None] | None = None,
                 poll_s: float = 0.5, retry_s: float = 1.0, vectors=None):
        self.redis, self.bm25, self.on_warm, self.vectors = redis, bm25, on_warm, vectors
        self.poll_s, self.retry_s = poll_s, retry_s
        self.subscribed = threading.Event()  # set once listening (tests wait on it before publishing)

    def handle(self, tenant: str) -> bool:
        """Warm ``tenant`` if this process caches it already or has room; whether it was warmed."""
        cache = self.bm25()
        if not cache.has_room_for(tenant):
            return False
        seconds = warm_tenant(self.redis, tenant, cache, self.vectors)
        if self.on_warm:
            self.on_warm(tenant, seconds)
        return True

    def run(self, stop: threading.Event) -> None:
        while not stop.is_set():
            pubsub = None
            try:
                pubsub = self.redis.pubsub(ignore_subscribe_messages=True)
                pubsub.subscribe(index_updated_channel())
                self.subscribed.set()
                while not stop.is_set():
                    message = pubsub.get_message(timeout=self.poll_s)
                    if message and message.get("type") == "message":
                        self.handle(to_str(message["data"]))
            except Exception:  # noqa: BLE001 - Redis down or restarting: listen again shortly
                self.subscribed.clear()
                log.warning("query cache warmer: listening again in %.1f s", self.retry_s, exc_info=True)
                stop.wait(self.retry_s)
            finally:
                if pubsub is not None:
                    try:
                        pubsub.close()
                    except Exception:  # noqa: BLE001
                        pass
