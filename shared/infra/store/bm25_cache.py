"""Per-process query indexes, rebuilt when a tenant's collection changes: BM25 over entities and chunks,
and the passage-entity graph that the graph walk ranks passages on."""

from __future__ import annotations

import threading

from shared.domain.retrieval.bm25 import BM25Index
from shared.domain.retrieval.graph_walk import WalkIndex, passage_titles
from shared.domain.storage import VECTOR_KINDS as KINDS
from shared.infra.redis.keys import Keys
from shared.infra.store.lru import LRU
from shared.infra.store.redis_graph import GraphStore
from shared.infra.store.synonym_store import SynonymStore

WALK = "walk"  # the cache key's kind for a tenant's walk graph
DEFAULT_MAX_BYTES = 1024 * 2**20  # ``QuerySettings.index_cache_mb``'s default


class BM25Cache:
    """``provider(tenant, kind)`` -> index whose ids are entity names ("entities") or chunk ids ("chunks").

    One index per (tenant, kind), valid while the tenant's vector version for that kind is unchanged, and
    one walk graph per tenant. They share one bound, ``max_bytes`` (``query.index_cache_mb``), counted by the
    indexes' own ``nbytes``: the least recently used go first, so a thousand small tenants and one
    million-passage tenant are held by the same rule. ``capacity`` optionally bounds the tenants as well."""

    def __init__(self, redis, capacity: int | None = None, synonyms: bool = False,
                 max_bytes: int = DEFAULT_MAX_BYTES):
        self.redis = redis
        self.synonyms = synonyms  # the walk crosses the tenant's synonym edges (``embedding.synonym_threshold``)
        self.capacity = capacity
        self._cache: LRU[tuple[str, str], tuple[object, BM25Index | WalkIndex]] = LRU(
            None if capacity is None else capacity * (len(KINDS) + 1), max_bytes, lambda hit: hit[1].nbytes)
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
        return self._cache.get_or_build((tenant, WALK), lambda hit: hit[0] == version,
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

    @property
    def nbytes(self) -> int:
        """What the cached indexes hold, by their own count."""
        return self._cache.nbytes

    def has_room_for(self, tenant: str) -> bool:
        """Whether caching ``tenant`` would likely evict nobody: it is cached already, or neither bound is
        reached (a warm-up only fills room, it never pushes out a tenant a user queried)."""
        cached = self.tenants()
        if tenant in cached:
            return True
        under_count = self.capacity is None or len(cached) < self.capacity
        return under_count and self._cache.nbytes < self._cache.max_bytes

    def warm(self, tenant: str) -> None:
        """Build the tenant's stale indexes now, so the next query finds them ready."""
        for kind in KINDS:
            self(tenant, kind)
        self.walk(tenant)
