"""Per-process query indexes, rebuilt when a tenant's collection changes: BM25 over entities and chunks,
and the passage-entity graph that the graph walk ranks passages on.

A process that builds an index also stores a snapshot of it in Redis, tagged with the versions it was built for
(``index_snapshots``); a cold process (a fresh worker, or a tenant evicted from this cache) loads that snapshot
when its tag is current instead of rebuilding the index from the tenant's rows. The ingestion's warm-up builds
them, so a user's first query on a new worker loads them."""

from __future__ import annotations

from collections.abc import Callable

from shared.domain.models import Entity
from shared.domain.retrieval.bm25 import BM25Index
from shared.domain.retrieval.graph_walk import WalkIndex, passage_titles
from shared.domain.storage import VECTOR_KINDS as KINDS
from shared.infra.redis.keys import Keys
from shared.infra.store import index_codec
from shared.infra.store.index_snapshots import DEFAULT_SNAPSHOT_BYTES, IndexSnapshots, version_tag
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
                 max_bytes: int = DEFAULT_MAX_BYTES, snapshot_bytes: int = DEFAULT_SNAPSHOT_BYTES):
        """``snapshot_bytes``: the largest index snapshot written to Redis (0: none written or read)."""
        self.redis = redis
        self.snapshots = IndexSnapshots(redis, snapshot_bytes) if snapshot_bytes > 0 else None
        self.synonyms = synonyms  # the walk crosses the tenant's synonym edges (``embedding.synonym_threshold``)
        self.capacity = capacity
        self._cache: LRU[tuple[str, str], tuple[object, BM25Index | WalkIndex]] = LRU(
            None if capacity is None else capacity * (len(KINDS) + 1), max_bytes, lambda hit: hit[1].nbytes)
        self.builds = 0  # BM25 indexes built by this cache (a cold query or a warm-up), for tests and logs
        self.walk_builds = 0  # passage-entity graphs built
        self.snapshot_loads = 0  # indexes loaded from their snapshot instead of built
        self._warm_rows: dict | None = None  # inside ``warm``: the entity rows read for its builds (``_entities``)

    def _version(self, tenant: str, kind: str) -> tuple:
        """The collection's version and the graph's epoch (a tenant deleted and rebuilt counts from 0 again)."""
        k = Keys(tenant)
        return tuple(self.redis.mget([k.vector_version(kind), k.graph_epoch()]))

    def __call__(self, tenant: str, kind: str) -> BM25Index | None:
        version = self._version(tenant, kind)

        def build() -> tuple:
            return version, self._load_or_build(tenant, kind, version, index_codec.bm25_from_bytes,
                                                index_codec.bm25_to_bytes, lambda: self._build(tenant, kind))

        return self._cache.get_or_build((tenant, kind), lambda hit: hit[0] == version, build)[1]

    def walk(self, tenant: str) -> WalkIndex:
        """The tenant's passage-entity graph, valid while its graph and both collections are unchanged."""
        k = Keys(tenant)
        version = tuple(self.redis.mget([k.graph_version(), k.vector_version("chunks"), k.vector_version("entities"),
                                         k.synonyms_version(), k.graph_epoch()]))

        def build() -> tuple:
            return version, self._load_or_build(tenant, WALK, version, index_codec.walk_from_bytes,
                                                index_codec.walk_to_bytes, lambda: self._build_walk(tenant))

        return self._cache.get_or_build((tenant, WALK), lambda hit: hit[0] == version, build)[1]

    def _load_or_build(self, tenant: str, kind: str, version: tuple, decode: Callable, encode: Callable,
                       build: Callable):
        if self.snapshots is None:
            return build()
        tag = version_tag(self.synonyms if kind == WALK else "", *version)
        index, loaded = self.snapshots.load_or_build(tenant, kind, tag, decode, encode, build)
        self.snapshot_loads += loaded
        return index

    def _entities(self, store: GraphStore) -> dict[str, Entity]:
        """Every entity row; inside ``warm`` read once for both of its builds that need them (the entity BM25 and
        the walk), reused only while the graph's revision is the one read before them (a merge in between bumps
        it, and the rows are read again)."""
        memo = self._warm_rows
        if memo is None:
            return store.all_entities()
        revision = store.revision()
        if memo.get("key") == (store.tenant, revision) and revision[0] is not None:
            return memo["rows"]
        rows = store.all_entities()
        memo.update(key=(store.tenant, revision), rows=rows)
        return rows

    def _build_walk(self, tenant: str) -> WalkIndex:
        store = GraphStore(self.redis, tenant)
        sources = {name: e.source_ids for name, e in self._entities(store).items()}
        self.walk_builds += 1
        edges = store.edge_list()
        if self.synonyms:
            edges += SynonymStore(self.redis, tenant).edges()
        return WalkIndex.build(store.all_chunk_ids(), sources, edges, passage_titles(store))

    def _build(self, tenant: str, kind: str) -> BM25Index:
        store = GraphStore(self.redis, tenant)
        if kind == "entities":
            pairs = [(n, f"{n} {e.description}") for n, e in self._entities(store).items()]
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
        self._warm_rows = {}
        try:
            for kind in KINDS:
                self(tenant, kind)
            self.walk(tenant)
        finally:
            self._warm_rows = None  # the rows are not kept past the warm-up: the indexes hold what they need
