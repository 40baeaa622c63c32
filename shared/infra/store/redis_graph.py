"""One tenant's documents, chunks and graph in Redis.

Concurrency model: what a chunk says about an entity or relation is one *field* (chunk id) of a
per-entity fragment hash, so concurrent writers never overwrite each other and re-running a chunk
rewrites the same field (a merged row may hold its only fragment instead: ``held_fragments``). The merged
record is recomputed from all fragments with optimistic concurrency (``merge_batch``).

``GraphStore`` is composed of four parts: documents and chunks (``redis_documents``), communities
and reports (``redis_communities``), extractions and their fragments (``redis_extractions``) and, here,
merging and the graph itself.
"""

from __future__ import annotations

import heapq
import uuid
from collections.abc import Callable, Iterable

from shared.domain.models import (
    Entity,
    EntityFragment,
    Relation,
    RelationFragment,
)
from shared.domain.retrieval.edge_index import EdgeIndex, Ranked
from shared.infra.redis.conn import to_str
from shared.infra.redis.keys import Keys
from shared.infra.store import dirty_marks, index_codec
from shared.infra.store.graph_codec import field_chunk, longest_first, unpack_entity_fragment, unpack_relation_fragment
from shared.infra.store.graph_edges import edge_changes, take_deltas
from shared.infra.store.held_fragments import holding, read_fragments
from shared.infra.store.index_snapshots import IndexSnapshots, version_tag
from shared.infra.store.lru import CACHED_TENANTS, LRU
from shared.infra.store.merge_write import row_json, write_merged  # noqa: F401 - row_json: where callers import it
from shared.infra.store.redis_communities import CommunityStore
from shared.infra.store.redis_documents import DocumentStore
from shared.infra.store.redis_extractions import ExtractionStore, rel_field, split_rel_field
from shared.infra.store.row_cache import VersionRows
from shared.infra.store.row_codec import unpack_row
from shared.infra.store.stale_reads import may_stand, stale_after

# Neighbour lists per tenant (``EdgeIndex``), keyed by the graph revision, with the relations queries ranked
# heaviest first (``EdgeIndex.ranked``, kept as queries ask for them). Read cache, never coordination.
# The entry's last field is the edge change log's count its lists include (``graph_edges.edge_changes``).
_ADJACENCY: LRU[str, tuple[tuple, object, tuple[EdgeIndex, dict[str, Ranked]], int]] = LRU(CACHED_TENANTS)
EDGES = "edges"  # the index snapshot kind of the neighbour lists
_ENTITY_ROWS: VersionRows[Entity] = VersionRows()
# Every entity name per tenant, keyed by the graph revision read before them (the gateway's entity search).
_ENTITY_NAMES: LRU[str, tuple[tuple, list[str]]] = LRU(8)
_RELATION_ROWS: VersionRows[Relation] = VersionRows()
# one key merged under its lock tries again while writers keep adding fragments to it (each retry follows a write)
_ONE_KEY_ATTEMPTS = 100


class GraphStore(DocumentStore, CommunityStore, ExtractionStore):
    """Read/write access to one tenant's data. Implements ``shared.domain.storage.GraphReader``."""

    def __init__(self, redis, tenant: str, lock_timeout_s: float = 120.0, snapshots: IndexSnapshots | None = None):
        """``snapshots``: where a query worker loads and stores the neighbour lists' snapshot (``index_snapshots``);
        without it they are read from the edges."""
        self.redis = redis
        self.tenant = tenant
        self.k = Keys(tenant)
        self.lock_timeout_s = lock_timeout_s
        self.snapshots = snapshots

    # -------------------------------------------------------------- merging
    def dirty_members(self, kind: str) -> list[str]:
        return sorted(to_str(x) for x in self.redis.smembers(self.k.dirty(kind)))

    def clear_dirty(self, kind: str, members: Iterable[str]) -> None:
        """Unmark ``members`` of the ``kind`` dirty set (e.g. once their vectors are stored)."""
        members = list(members)
        if members:
            self.redis.srem(self.k.dirty(kind), *members)

    def take_dirty(self, kind: str) -> list[str]:
        """The ``kind`` dirty set moved aside for a stage that reads its rows and saves what it made of them
        (``dirty_marks``: a row marked again meanwhile keeps its mark), with what such a stage left unfinished."""
        return dirty_marks.take(self.redis, self.k, kind)

    def clear_taken(self, kind: str, members: Iterable[str]) -> None:
        """Unmark ``members`` of what ``take_dirty`` took (once their work is saved)."""
        dirty_marks.done(self.redis, self.k, kind, members)

    def merge_entity(self, name: str, merge: Callable[[str, list[EntityFragment]], Entity | None]) -> bool:
        """Recompute one entity from all its fragments, under a per-entity lock (``merge_batch`` of one key, so
        concurrent callers take turns instead of conflicting). ``merge`` returns None to delete the entity.
        Returns True if written."""
        with self.redis.lock(self.k.lock("ent:" + name), timeout=self.lock_timeout_s, blocking_timeout=None):
            return self.merge_batch("entities", [name], merge, max_attempts=_ONE_KEY_ATTEMPTS)[0] > 0

    def merge_relation(
        self, field: str, merge: Callable[[str, str, list[RelationFragment]], Relation | None]
    ) -> bool:
        with self.redis.lock(self.k.lock("rel:" + field), timeout=self.lock_timeout_s, blocking_timeout=None):
            return self.merge_batch("relations", [field], lambda key, frags: merge(*split_rel_field(key), frags),
                                    max_attempts=_ONE_KEY_ATTEMPTS)[0] > 0

    def merge_batch(self, kind: str, keys: list[str], merge: Callable[..., object | None],
                    max_attempts: int = 8, map_fn: Callable = map, previous: bool = False) -> tuple[int, int]:
        """Merge many entities ("entities") or relation fields ("relations") with few round trips.

        Optimistic concurrency: the fragment hashes are WATCHed while read, the merged records are
        written in one MULTI/EXEC, and the keys a concurrent fragment write changed meanwhile are merged again
        (the others are written: ``merge_write``), so no update is lost without holding per-key locks across the
        (possibly slow) merge function. A key's fragments are its hash's and the one its row may hold
        (``held_fragments``); a row written from one fragment holds it, and its hash is deleted.
        ``map_fn`` applies it (e.g. a thread pool's ``map``, so LLM summaries overlap), to the keys with the
        most fragment bytes first (``longest_first``). With ``previous``, ``merge(key, fragments, stored row or
        None)`` is called (a summary already written from the same fragments is reused). Returns (written,
        deleted).
        """
        frag_key = self.k.entity_fragments if kind == "entities" else (
            lambda f: self.k.relation_fragments(*split_rel_field(f)))
        unpack = (lambda key, cid, v: unpack_entity_fragment(v, key, cid)) if kind == "entities" else (
            lambda key, cid, v: unpack_relation_fragment(v, *split_rel_field(key), cid))
        target = self.k.entities() if kind == "entities" else self.k.relations()
        model = Entity if kind == "entities" else Relation
        written, deleted, pending = 0, 0, list(keys)
        if not pending:
            return 0, 0
        for _attempt in range(max_attempts):
            raws, rows, held = read_fragments(self, kind, pending, frag_key, target,
                                              lambda key, raw: unpack_row(model, raw, key))
            stored = dict(zip(pending, rows, strict=True))

            def merged(item: tuple[str, dict], stored: dict = stored, held: dict = held) -> object | None:
                key, fields = item
                if key in held:
                    fields = {**fields, held[key].field: held[key].value}
                frags = [unpack(key, field_chunk(f), v) for f, v in fields.items()]
                if not frags:
                    return None
                row = merge(key, frags, stored[key]) if previous else merge(key, frags)
                return None if row is None else holding(row, fields)

            items = longest_first(list(zip(pending, raws, strict=True)))
            results = dict(zip((key for key, _ in items), map_fn(merged, items), strict=True))
            done = self._write_merged(kind, pending, frag_key, target, raws, results, held, stored)
            written += sum(results[k] is not None for k in done)
            deleted += sum(results[k] is None for k in done)
            pending = [k for k in pending if k not in done]
            if not pending:
                return written, deleted
        raise RuntimeError(f"merge of {len(pending)} of {len(keys)} {kind} kept conflicting with concurrent writers")

    def _write_merged(self, kind, keys, frag_key, target, raws, results, held, before=None) -> set[str]:
        return write_merged(self, kind, keys, frag_key, target, raws, results, held, before)

    # ---------------------------------------------------------------- graph
    def entities(self, names: Iterable[str]) -> dict[str, Entity]:
        """Entities by name (absent names left out), parsed once per graph version per process (``row_cache``);
        each caller gets its own copy, with the degree read now."""
        names = list(dict.fromkeys(names))
        if not names:
            return {}
        pipe = self.redis.pipeline(transaction=False)
        for key in self._revision_keys():  # GETs, not an MGET: a cluster pipeline takes single-key commands
            pipe.get(key)
        pipe.hmget(self.k.degrees(), names)
        *revision, degrees = pipe.execute()
        rows = _ENTITY_ROWS.rows(self.k.p, tuple(revision), self.redis, names, lambda missing: [
            unpack_row(Entity, raw, name) if raw else None
            for name, raw in zip(missing, self.redis.hmget(self.k.entities(), missing), strict=True)])
        out = {}
        for name, deg in zip(names, degrees, strict=True):
            if (ent := rows.get(name)) is not None:
                out[name] = ent.model_copy(update={"degree": int(deg or 0)})
        return out

    def all_entity_names(self) -> list[str]:
        """Every entity name, sorted: read (``HKEYS``) once per graph revision per process, then one ``MGET`` per
        call (a search box's keystrokes on a graph of 100,000 entities re-read 100,000 names before). Shared: do
        not modify the list."""
        revision = self.revision()
        cached = _ENTITY_NAMES.get(self.k.p)
        if cached is not None and cached[0] == revision and revision[0] is not None:
            return cached[1]
        names = sorted(to_str(x) for x in self.redis.hkeys(self.k.entities()))
        _ENTITY_NAMES.put(self.k.p, (revision, names))  # a write since ``revision`` only makes the next call re-read
        return names

    def entity_degrees(self, names: Iterable[str]) -> dict[str, int]:
        names = list(dict.fromkeys(names))
        raws = self.redis.hmget(self.k.degrees(), names) if names else []
        return {n: int(d or 0) for n, d in zip(names, raws, strict=True)}

    def all_degrees(self) -> dict[str, int]:
        return {to_str(k): int(v) for k, v in self.redis.hgetall(self.k.degrees()).items()}

    def all_entities(self, degrees: dict[str, int] | None = None) -> dict[str, Entity]:
        """Every entity, with its degree (from ``degrees`` when the caller has read them)."""
        degrees = self.all_degrees() if degrees is None else degrees
        out = {}
        for k, v in self.redis.hscan_iter(self.k.entities(), count=2000):
            name = to_str(k)
            ent = unpack_row(Entity, v, name)
            ent.degree = degrees.get(name, 0)
            out[name] = ent
        return out

    def raw_entity_rows(self) -> dict[str, bytes]:
        """Every entity row as stored (name -> bytes; ``row_codec.unpack_row`` reads one), unparsed."""
        return {to_str(k): v for k, v in self.redis.hscan_iter(self.k.entities(), count=2000)}

    def all_relations(self) -> dict[tuple[str, str], Relation]:
        out = {}
        for k, v in self.redis.hscan_iter(self.k.relations(), count=2000):
            field = to_str(k)
            out[split_rel_field(field)] = unpack_row(Relation, v, field)
        return out

    def read_whole_graph(self) -> tuple[dict[str, Entity], dict[tuple[str, str], Relation]]:
        """Every entity (with its degree) and relation, parsed and filed in this process's row caches under the
        revision read before them (``row_cache``): the cache warmer's read of a small graph, after which a first
        query parses none of its rows (otherwise it parses the ones a warm query finds already held)."""
        revision = self.revision()
        entities, relations = self.all_entities(), self.all_relations()
        _ENTITY_ROWS.fill(self.k.p, revision, self.redis, entities)
        _RELATION_ROWS.fill(self.k.p, revision, self.redis, {rel_field(a, b): r for (a, b), r in relations.items()})
        return entities, relations

    def edge_list(self) -> list[tuple[str, str, float]]:
        return [(*split_rel_field(to_str(k)), float(v)) for k, v in self.redis.hscan_iter(self.k.edges(), count=5000)]

    def edge_weights(self, fields: Iterable[str]) -> dict[str, float]:
        """Weights of the edges stored under these relation fields (absent ones left out)."""
        fields = list(dict.fromkeys(fields))
        raws = self.redis.hmget(self.k.edges(), fields) if fields else []
        return {f: float(w) for f, w in zip(fields, raws, strict=True) if w is not None}

    def relations(self, keys: Iterable[tuple[str, str]], revision: tuple | None = None
                  ) -> dict[tuple[str, str], Relation]:
        """Relations by (src, tgt) (absent ones left out), parsed once per graph version per process
        (``row_cache``); shared read-only rows. ``revision``: the (version, epoch) the caller has just read."""
        fields = list(dict.fromkeys(rel_field(a, b) for a, b in keys))
        if not fields:
            return {}
        rows = _RELATION_ROWS.rows(self.k.p, revision or self.revision(), self.redis, fields, lambda missing: [
            unpack_row(Relation, raw, field) if raw else None
            for field, raw in zip(missing, self.redis.hmget(self.k.relations(), missing), strict=True)])
        return {split_rel_field(f): rel for f in fields if (rel := rows.get(f)) is not None}

    def adjacency(self) -> EdgeIndex:
        """Neighbour lists, cached per process until the tenant's graph version changes."""
        return self._graph_index()[1]

    def _graph_index(self) -> tuple[tuple, EdgeIndex, dict[str, Ranked]]:
        """(revision read, neighbour lists, each entity's relations heaviest first as queries asked for them),
        cached per process per graph version. A later version's lists are this process's former ones with the
        edges changed since applied (``graph_edges.edge_changes``); a cold process loads the lists' snapshot when it
        is current; else (or when the change log no longer reaches back) every edge is read."""
        *version, logged = self.revision(self.k.edge_logged())  # one read: the log's count is that of this version
        version, logged = tuple(version), int(logged or 0)

        def build() -> tuple:
            position = [logged]  # the log's count the lists will include

            def current() -> EdgeIndex:
                held = _ADJACENCY.get(self.k.p)
                if (held is not None and held[1] is self.redis and version[0] is not None and held[0][0] is not None
                        and held[0][1] == version[1] and int(held[0][0]) <= int(version[0])):  # the same graph, later
                    position[0], changes = edge_changes(self.redis, self.k, held[3])
                    if changes is not None:
                        return held[2][0].updated(changes)
                    position[0] = logged
                return EdgeIndex.build(self.edge_list())

            if self.snapshots is None or version[0] is None:
                edges = current()
            else:  # a snapshot of this version when one is stored, else built here and stored for cold processes
                edges, _ = self.snapshots.load_or_build(self.tenant, EDGES, version_tag(*version),
                                                        index_codec.edges_from_bytes, index_codec.edges_to_bytes,
                                                        current)
            return version, self.redis, (edges, {}), position[0]  # the ranked lists: filled by queries

        cached = _ADJACENCY.get_or_build(self.k.p, lambda hit: hit[0] == version and hit[1] is self.redis, build,
                                         stale_after(), lambda hit: hit[1] is self.redis and may_stand(hit[0], version))
        return (version, *cached[2])

    def neighbors(self, names: Iterable[str]) -> dict[str, list[str]]:
        edges = self.adjacency()
        return {n: edges.neighbours_of(n) for n in set(names)}

    def relations_of(self, names: Iterable[str], limit: int | None = None) -> list[Relation]:
        """The relations of ``names``; with ``limit``, only the heaviest ``limit`` (by weight, then by the sorted
        pair), heaviest first, chosen from the cached edge weights before anything is read. A hub has thousands
        of relations: each name's are ranked once per graph version (``EdgeIndex.ranked``) and merged, so a query
        reads ``limit`` of them instead of sorting every relation of every hub it names."""
        revision, edges, ranked = self._graph_index()
        names = set(names)
        if limit is None:
            keys = {key for n in names for _w, key in edges.ranked(n)}
            return list(self.relations(keys, revision).values())
        lists = []
        for n in names:
            got = ranked.get(n)
            if got is None:  # a concurrent first use ranks the same list twice at worst
                got = ranked[n] = edges.ranked(n)
            lists.append(got)
        chosen: dict[tuple[str, str], None] = {}
        for _neg_weight, key in heapq.merge(*lists):
            if len(chosen) >= limit:
                break
            chosen[key] = None
        found = self.relations(chosen, revision)
        return [found[k] for k in chosen if k in found]

    def set_degrees(self, degrees: dict[str, int]) -> None:
        pipe = self.redis.pipeline(transaction=True)
        pipe.delete(self.k.degrees())
        if degrees:
            pipe.hset(self.k.degrees(), mapping=degrees)
        pipe.execute()

    def degree_deltas(self) -> dict[str, int]:
        """Edges added less removed per entity since the degrees were counted (``graph_edges``)."""
        return {to_str(k): int(v) for k, v in self.redis.hgetall(self.k.degree_delta()).items()}

    def update_degrees(self, changed: dict[str, int], removed: Iterable[str], deltas: dict[str, int]) -> None:
        """Write only the degrees that changed (``removed``: entities with none left), counted from the edges read
        after the pending counts ``deltas``, which are dropped."""
        pipe = self.redis.pipeline(transaction=True)
        take_deltas(pipe, self.k, deltas, apply=False)
        items, removed = list(changed.items()), list(removed)
        for i in range(0, len(items), 5000):
            pipe.hset(self.k.degrees(), mapping=dict(items[i : i + 5000]))
        for i in range(0, len(removed), 5000):
            pipe.hdel(self.k.degrees(), *removed[i : i + 5000])
        pipe.execute()

    def graph_version(self) -> int:
        return int(self.redis.get(self.k.graph_version()) or 0)

    def _bump(self, pipe) -> None:
        """In a write's transaction: a new graph version, and an epoch if the graph has none yet (a tenant deleted
        and rebuilt counts its versions from 0 again; with the epoch, (version, epoch) never repeats)."""
        pipe.incr(self.k.graph_version())
        pipe.set(self.k.graph_epoch(), uuid.uuid4().hex, nx=True)

    def _revision_keys(self) -> tuple[str, str]:
        return self.k.graph_version(), self.k.graph_epoch()

    def revision(self, *also: str) -> tuple:
        """(version, epoch): what the per-process parsed rows are keyed by (``row_cache``), read in one round trip
        with the values of the ``also`` keys (another index's version) after them."""
        return tuple(self.redis.mget(*self._revision_keys(), *also))

    def clustered_current(self) -> bool:
        """Whether the stored communities were computed from the graph as it is now (clustering can be skipped)."""
        return self.graph_version() == self.clustered_version() and bool(self.redis.exists(self.k.communities()))

    def exclusive(self, name: str, timeout_s: float):
        """A tenant-wide lock held while ``name`` runs (one clustering of a tenant at a time), waited for."""
        return self.redis.lock(self.k.lock(name), timeout=timeout_s, blocking_timeout=None)

    # ---------------------------------------------------------------- stats
    def graph_sizes(self) -> dict[str, int]:
        """Entities and relations stored (two HLENs)."""
        return {"entities": self.redis.hlen(self.k.entities()), "relations": self.redis.hlen(self.k.relations())}

    def stats(self) -> dict:
        return {
            "documents": self.document_count(),
            "chunks": self.redis.scard(self.k.chunks()),
            **self.graph_sizes(),
            "communities_by_level": {str(k): v for k, v in sorted(self.community_levels().items())},
            "reports": self.redis.hlen(self.k.reports()),
        }
