"""Per-process query indexes, rebuilt when a tenant's collection changes: BM25 over entities and chunks,
and the passage-entity graph that the graph walk ranks passages on."""

from __future__ import annotations

import threading

from shared.domain.retrieval.bm25 import BM25Index
from shared.domain.retrieval.graph_walk import WalkIndex, passage_titles
from shared.domain.storage import VECTOR_KINDS as KINDS
from shared.infra.keys import Keys
from shared.infra.lru import CACHED_TENANTS, LRU
from shared.infra.store.redis_graph import GraphStore
from shared.infra.store.synonym_store import SynonymStore


class BM25Cache:
    """``provider(tenant, kind)`` -> index whose ids are entity names ("entities") or chunk ids ("chunks").

    One index per (tenant, kind), valid while the tenant's vector version for that kind is unchanged;
    at most ``capacity`` tenants are kept (least recently used go first)."""

    def __init__(self, redis, capacity: int = CACHED_TENANTS, synonyms: bool = False):
        self.redis = redis
        self.synonyms = synonyms  # the walk crosses the tenant's synonym edges (``embedding.synonym_threshold``)
        self._cache: LRU[tuple[str, str], tuple[int, BM25Index]] = LRU(capacity * len(KINDS))
        self._walks: LRU[str, tuple[tuple[int, ...], WalkIndex]] = LRU(capacity)
        self._lock = threading.Lock()
        self._walk_lock = threading.Lock()
        self.builds = 0  # BM25 indexes built by this cache (a cold query or a warm-up), for tests and logs
        self.walk_builds = 0  # passage-entity graphs built

    def _version(self, tenant: str, kind: str) -> int:
        return int(self.redis.get(Keys(tenant).vector_version(kind)) or 0)

    def __call__(self, tenant: str, kind: str) -> BM25Index | None:
        version = self._version(tenant, kind)
        return self._cache.get_or_build((tenant, kind), lambda hit: hit[0] == version,
                                        lambda: (version, self._build(tenant, kind)), self._lock)[1]

    def walk(self, tenant: str) -> WalkIndex:
        """The tenant's passage-entity graph, valid while its graph and both collections are unchanged."""
        k = Keys(tenant)
        version = tuple(int(v or 0) for v in self.redis.mget(
            [k.graph_version(), k.vector_version("chunks"), k.vector_version("entities"), k.synonyms_version()]))
        return self._walks.get_or_build(tenant, lambda hit: hit[0] == version,
                                        lambda: (version, self._build_walk(tenant)), self._walk_lock)[1]

    def _build_walk(self, tenant: str) -> WalkIndex:
        store = GraphStore(self.redis, tenant)
        sources = {name: e.source_ids for name, e in store.all_entities().items()}
        self.walk_builds += 1
        edges = store.edge_list()
        if self.synonyms:
            edges += SynonymStore(self.redis, tenant).edges()
        return WalkIndex.build(store.all_chunk_ids(), sources, edges, passage_titles(store))

    def _build(self, tenant: str, kind: str) -> BM25Index:
        store = GraphStore(self.redis, tenant)
        if kind == "entities":
            pairs = [(n, f"{n} {e.description}") for n, e in store.all_entities().items()]
        else:
            pairs = [(c.id, c.text) for c in store.chunks(store.all_chunk_ids()).values()]
        self.builds += 1
        return BM25Index.build(pairs)

    def tenants(self) -> set[str]:
        return {tenant for tenant, _kind in self._cache}

    def has_room_for(self, tenant: str) -> bool:
        """Whether caching ``tenant`` would evict nobody: it is cached already, or the cache is not full."""
        cached = self.tenants()
        return tenant in cached or len(cached) < self._cache.capacity // len(KINDS)

    def warm(self, tenant: str) -> None:
        """Build the tenant's stale indexes now, so the next query finds them ready."""
        for kind in KINDS:
            self(tenant, kind)
        self.walk(tenant)
