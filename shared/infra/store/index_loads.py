"""A tenant's query indexes loaded side by side.

A query worker that does not hold a tenant's indexes (a fresh process, or a tenant it evicted) would load them
one after another as the first query reaches each: BM25 over chunks and over entities, the walk graph, the
neighbour lists and the embedded store's vector matrices, each read from Redis (a snapshot or the rows) and
decoded. Much of that is waiting on Redis and copying arrays, which overlaps well across threads, so a cold
tenant's indexes are started together here and the query finds them loaded or loading (each cache serialises
the loads of one key: a query asking for an index in flight waits for that load instead of starting its own).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor

from shared.domain.storage import VECTOR_KINDS

log = logging.getLogger(__name__)
CHUNK_MODES = {"naive"}  # modes that read the chunk indexes only
LOADERS = 6  # threads loading indexes, per process
_pool: tuple[int, ThreadPoolExecutor] | None = None  # (the process it belongs to, the pool)


def _loaders() -> ThreadPoolExecutor:
    """This process's loading threads, made on first use: a forked child makes its own (a pool's threads do not
    survive a fork)."""
    global _pool
    if _pool is None or _pool[0] != os.getpid():
        _pool = (os.getpid(), ThreadPoolExecutor(LOADERS, thread_name_prefix="gf-index-load"))
    return _pool[1]


def index_loads(store, bm25, vectors=None, mode: str | None = None) -> list[Callable[[], object]]:
    """What a query of ``mode`` (None: every mode) reads of the tenant's indexes, one loader each."""
    tenant = store.tenant
    kinds = ("chunks",) if mode in CHUNK_MODES else VECTOR_KINDS
    loads: list[Callable[[], object]] = [lambda kind=kind: bm25(tenant, kind) for kind in kinds]
    warm_vectors = getattr(vectors, "warm_kind", None)  # the embedded store's matrices (Weaviate keeps none)
    if warm_vectors is not None:
        loads += [lambda kind=kind: warm_vectors(tenant, kind) for kind in kinds]
    if mode not in CHUNK_MODES:
        loads += [lambda: bm25.walk(tenant), store.adjacency]
    return loads


def load_side_by_side(store, bm25, vectors=None, mode: str | None = None) -> list[Future]:
    """Start every load of ``index_loads``; a load that fails is logged and left to the query, which then builds
    that index itself (and reports its own error)."""
    return [_loaders().submit(_logged, store.tenant, load) for load in index_loads(store, bm25, vectors, mode)]


def prefetch_cold(store, bm25, vectors=None, mode: str | None = None) -> None:
    """Start loading the tenant's indexes when this process holds none of them (a warm tenant's stale index is
    the warm-up's to rebuild, ``shared.infra.store.warmup``)."""
    if mode != "global" and store.tenant not in bm25.tenants():
        load_side_by_side(store, bm25, vectors, mode)


def _logged(tenant: str, load: Callable[[], object]) -> None:
    try:
        load()
    except Exception:  # noqa: BLE001 - the query that needs this index builds it and reports its own error
        log.warning("loading a query index of tenant %s failed", tenant, exc_info=True)
