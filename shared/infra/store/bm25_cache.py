"""Per-process query indexes, rebuilt when a tenant's collection changes: BM25 over entities and chunks,
and the passage-entity graph that the graph walk ranks passages on.

A process that builds an index also stores a snapshot of it in Redis, tagged with the versions it was built for
(``index_snapshots``); a cold process (a fresh worker, or a tenant evicted from this cache) loads that snapshot
when its tag is current instead of rebuilding the index from the tenant's rows. The ingestion's warm-up builds
them, so a user's first query on a new worker loads them.

A BM25 index of a version gone stale is updated, not rebuilt: the documents added, changed or removed since are
found (chunks by id; entities by a digest of their stored row) and only those are tokenized, so the warm-up after a
batch indexes what the batch wrote, not everything the tenant holds. The walk graph likewise parses only the entity
rows whose digest changed and reads only the new passages' titles (``walk_build.assemble``), and takes the
relations from the neighbour lists, which follow the edge change log (``GraphStore.adjacency``). The entity rows
read are those the entity change log names since the former index was built (``change_log``); every row only when
there is no former index in this process or the log no longer reaches back.

A user's query is not held up by a rebuild: it is served the index of the version before once
``QuerySettings.stale_index_after_s`` has passed, and the rebuild goes on behind it (``stale_reads``)."""

from __future__ import annotations

import contextlib
import hashlib
import logging
import threading
from collections.abc import Callable

from shared.domain.models import Entity
from shared.domain.retrieval.bm25 import BM25Index
from shared.domain.retrieval.graph_walk import WalkIndex
from shared.domain.retrieval.walk_build import assemble, passage_titles, row_digests
from shared.domain.storage import VECTOR_KINDS as KINDS
from shared.infra.redis.keys import Keys
from shared.infra.store import change_log, index_codec
from shared.infra.store.index_snapshots import DEFAULT_SNAPSHOT_BYTES, IndexSnapshots, version_tag
from shared.infra.store.lru import LRU
from shared.infra.store.redis_graph import GraphStore
from shared.infra.store.row_codec import row_field
from shared.infra.store.stale_reads import may_stand, stale_after
from shared.infra.store.synonym_store import SynonymStore

WALK = "walk"  # the cache key's kind for a tenant's walk graph
DEFAULT_MAX_BYTES = 1024 * 2**20  # ``QuerySettings.index_cache_mb``'s default
log = logging.getLogger(__name__)


def stored_fingerprint(raw: bytes) -> int:
    """A 64-bit fingerprint of a stored row's bytes, the same in every process (Python's ``hash`` of bytes is not); not
    ``row_counts.row_digest``, which checks a row's token counts."""
    return int.from_bytes(hashlib.blake2b(raw, digest_size=8).digest(), "little")


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
        self.documents_indexed = 0  # documents the BM25 builds tokenized (an update: only those new or changed)
        self._shared: dict | None = None  # inside ``sharing_rows``: the entity rows read for its builds
        self._sharers = 0
        self._reading = threading.RLock()

    def _version(self, tenant: str, kind: str) -> tuple:
        """The collection's version and the graph's epoch (a tenant deleted and rebuilt counts from 0 again)."""
        k = Keys(tenant)
        return tuple(self.redis.mget([k.vector_version(kind), k.graph_epoch()]))

    def __call__(self, tenant: str, kind: str) -> BM25Index | None:
        version = self._version(tenant, kind)

        def build() -> tuple:
            return version, self._load_or_build(tenant, kind, version, index_codec.bm25_from_bytes,
                                                index_codec.bm25_to_bytes,
                                                lambda: self._build(tenant, kind, self._former(tenant, kind)))

        return self._cache.get_or_build((tenant, kind), lambda hit: hit[0] == version, build, stale_after(),
                                        lambda hit: may_stand(hit[0], version))[1]

    def walk(self, tenant: str) -> WalkIndex:
        """The tenant's passage-entity graph, valid while its graph and both collections are unchanged."""
        k = Keys(tenant)
        version = tuple(self.redis.mget([k.graph_version(), k.vector_version("chunks"), k.vector_version("entities"),
                                         k.synonyms_version(), k.graph_epoch()]))

        def build() -> tuple:
            return version, self._load_or_build(tenant, WALK, version, index_codec.walk_from_bytes,
                                                index_codec.walk_to_bytes, lambda: self._build_walk(tenant))

        return self._cache.get_or_build((tenant, WALK), lambda hit: hit[0] == version, build, stale_after(),
                                        lambda hit: may_stand(hit[0], version))[1]

    def _load_or_build(self, tenant: str, kind: str, version: tuple, decode: Callable, encode: Callable,
                       build: Callable):
        if self.snapshots is None:
            return build()
        tag = version_tag(self.synonyms if kind == WALK else "", *version)
        index, loaded = self.snapshots.load_or_build(tenant, kind, tag, decode, encode, build)
        self.snapshot_loads += loaded
        return index

    def _entity_state(self, store: GraphStore, held: dict[str, int] | None, log_at: tuple | None
                      ) -> tuple[dict[str, bytes], dict[str, int], tuple | None]:
        """(entity rows as stored, name -> bytes: at least every row changed since the former index; each entity's
        fingerprint now; where the entity change log stood, to be kept with the new index).

        ``held``: the fingerprints the former index was built from, ``log_at`` where the log stood then (the graph's
        epoch and the log's count). When the log still reaches back, only the rows it names are read; otherwise (no
        former index, one loaded from a snapshot, another epoch, a log trimmed past it) every row is."""
        k = store.k
        epoch = self.redis.get(k.graph_epoch())
        if held is not None and log_at is not None and epoch is not None and log_at[0] == epoch:
            logged, names = change_log.read_since(self.redis, k.entity_log(), k.entity_logged(), log_at[1])
            if names is not None:
                rows, digests = {}, dict(held)
                for name, raw in change_log.current(self.redis, k.entities(), names):
                    if raw is None:
                        digests.pop(name, None)
                    else:
                        rows[name], digests[name] = raw, stored_fingerprint(raw)
                return rows, digests, (epoch, logged)
        return self._entity_rows(store)

    def _entity_rows(self, store: GraphStore) -> tuple[dict[str, bytes], dict[str, int], tuple | None]:
        """Every entity row as stored (name -> bytes), its fingerprint, and where the entity change log stood before
        they were read (None before the graph's first write). Inside ``sharing_rows`` (a warm-up, whose entity BM25
        and walk builds run side by side) read once for both: the second build waits for the first's read and
        reuses it while the graph's revision is the one read before it (a merge in between bumps it, and the rows
        are read again)."""
        def read() -> tuple[dict[str, bytes], dict[str, int], tuple | None]:
            epoch, logged = self.redis.mget([store.k.graph_epoch(), store.k.entity_logged()])
            rows = store.raw_entity_rows()
            at = None if epoch is None else (epoch, int(logged or 0))
            return rows, {name: stored_fingerprint(raw) for name, raw in rows.items()}, at

        if self._shared is None:
            return read()
        with self._reading:
            memo, revision = self._shared, store.revision()
            if memo is not None and memo.get("key") == (store.tenant, revision) and revision[0] is not None:
                return memo["read"]
            got = read()
            if memo is not None:
                memo.update(key=(store.tenant, revision), read=got)
            return got

    @contextlib.contextmanager
    def sharing_rows(self):
        """While inside, builds share one read of a tenant's entity rows (``_entity_rows``); the rows are let go
        when the last one leaves (the indexes keep what they need of them)."""
        with self._reading:
            self._sharers += 1
            if self._shared is None:
                self._shared = {}
        try:
            yield
        finally:
            with self._reading:
                self._sharers -= 1
                if not self._sharers:
                    self._shared = None

    def _former(self, tenant: str, kind: str) -> BM25Index | None:
        """The index of ``kind`` this process held for an earlier version, else the one last snapshotted in Redis
        (a cold process): what a rebuild updates instead of indexing every document again."""
        held = self._cache.get((tenant, kind))
        if held is not None:
            return held[1]
        if self.snapshots is None:
            return None
        try:
            data = self.snapshots.load_latest(tenant, kind)
            return None if data is None else index_codec.bm25_from_bytes(data)
        except Exception:  # noqa: BLE001 - an unreadable snapshot only costs indexing every document
            log.warning("index snapshot %s of tenant %s unreadable: indexing every document", kind, tenant,
                        exc_info=True)
            return None

    def _build_walk(self, tenant: str) -> WalkIndex:
        """The walk graph now, from the one this process held for an earlier version when it has one: only the
        entity rows whose fingerprint changed are parsed, only the new passages' titles read
        (``walk_build.assemble``); the relations come from the neighbour lists queries use (``adjacency``)."""
        store = GraphStore(self.redis, tenant, snapshots=self.snapshots)
        held = self._cache.get((tenant, WALK))
        former = None if held is None else held[1]
        log_at = former.inputs.log_at if former is not None and former.inputs is not None else None
        rows, digests, log_at = self._entity_state(store, row_digests(former), log_at)
        self.walk_builds += 1
        extra = SynonymStore(self.redis, tenant).edges() if self.synonyms else []
        index = assemble(store.all_chunk_ids(), digests,
                         lambda names: {n: row_field(Entity, rows[n], n, "source_ids") for n in names},
                         store.adjacency(), lambda ids: passage_titles(store, ids), former, extra)
        index.inputs.log_at = log_at
        return index

    def _build(self, tenant: str, kind: str, former: BM25Index | None) -> BM25Index:
        """The index of ``kind`` for the tenant's documents now: ``former`` less what is gone, with what is new or
        changed (re-)indexed; every document when there is no ``former``. Chunks never change under their id (it
        is their text's hash), so the chunk index adds and drops ids; an entity's text changes when a merge
        rewrites its row, which its digest (a hash of the stored row) tells without parsing the row."""
        store = GraphStore(self.redis, tenant)
        self.builds += 1
        if kind == "entities":
            if former is None or former.digests is None:
                former, held = BM25Index([], []), None
            else:
                held = dict(zip(former.ids, former.digests.tolist(), strict=True))
            rows, digests, log_at = self._entity_state(store, held, former.log_at)
            held = held or {}
            changed = [name for name, digest in digests.items() if held.get(name) != digest]
            pairs = [(name, f"{name} {row_field(Entity, rows[name], name, 'description')}") for name in changed]
            self.documents_indexed += len(pairs)
            index = former.updated([name for name in held if name not in digests], pairs, [digests[n] for n in changed])
            index.log_at = log_at
            return index
        ids = store.all_chunk_ids()
        former = former if former is not None and former.digests is None else BM25Index([], [])
        held, now = set(former.ids), set(ids)
        pairs = [(c.id, c.text) for c in store.chunks([i for i in ids if i not in held]).values()]
        self.documents_indexed += len(pairs)
        return former.updated(held - now, pairs)

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
        with self.sharing_rows():
            for kind in KINDS:
                self(tenant, kind)
            self.walk(tenant)
