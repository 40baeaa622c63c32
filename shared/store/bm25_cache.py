"""Per-process BM25 indexes for the embedded store, rebuilt when a tenant's collection changes."""

from __future__ import annotations

import threading

from shared.keys import Keys
from shared.retrieval.bm25 import BM25Index
from shared.store.redis_graph import GraphStore


class BM25Cache:
    """``provider(tenant, kind)`` -> index whose ids are entity names ("entities") or chunk ids ("chunks")."""

    def __init__(self, redis):
        self.redis = redis
        self._cache: dict[tuple[str, str], tuple[int, BM25Index]] = {}
        self._lock = threading.Lock()

    def __call__(self, tenant: str, kind: str) -> BM25Index | None:
        version = int(self.redis.get(Keys(tenant).vector_version(kind)) or 0)
        hit = self._cache.get((tenant, kind))
        if hit and hit[0] == version:
            return hit[1]
        with self._lock:
            store = GraphStore(self.redis, tenant)
            if kind == "entities":
                pairs = [(n, f"{n} {e.description}") for n, e in store.all_entities().items()]
            else:
                pairs = [(c.id, c.text) for c in store.chunks(store.all_chunk_ids()).values()]
            index = BM25Index.build(pairs)
            self._cache[(tenant, kind)] = (version, index)
            return index
