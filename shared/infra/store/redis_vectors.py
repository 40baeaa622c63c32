"""Embedded vector store: vectors in Redis (reachable by every worker process), searched in each process.

A tenant's collection of a kind is stored as fixed-size rows: each vector, normalised, as float16 (half the bytes
of float32; a cosine moves by less than 1e-3, far below what separates two passages), at its row of a block (a
Redis string of at most ``BLOCK_BYTES``, so no value nears Redis's 512 MB limit), an id -> row hash, the rows
deleted vectors left (reused first) and the payloads as JSON by id. A process reads a collection with one ``GET``
per block: a cold query worker reads hundreds of thousands of vectors in bulk instead of one hash field each, and
keeps the blocks as they came, scored in place (``half_rows``), with no float32 copy of them. Writes are one script
each (atomic, and every key shares the tenant's hash tag, so a Redis Cluster runs them too). A collection stored in
the earlier layout (one hash field of float32 bytes per id) is moved to the blocks when first read.

The row ids (which id each row holds) come from a snapshot of them per collection version (``index_snapshots``,
kind ``rowids-<kind>``, tagged with the version counter and the graph's epoch read before the rows): one blob of
the ids as a ``StringTable`` and the free rows' numbers, copied as arrays, where the id -> row hash would be
hundreds of thousands of fields to parse and decode. A process that finds no snapshot for the current version (or
a damaged one) reads the hash with ``HGETALL`` and, when no write raced that read, stores the snapshot for the
next cold process.

Each process caches a tenant/kind collection's rows and reloads them only when the collection's version counter
changes, so repeated searches cost one GET plus a pass over the rows and one HMGET of the hits' payloads.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Sequence

import numpy as np

from shared.domain.retrieval.strings import StringTable
from shared.domain.storage import NAME_VECTORS, VectorHit, VectorItem
from shared.domain.storage import VECTOR_KINDS as KINDS
from shared.infra.redis.bulk_read import read_value
from shared.infra.redis.conn import to_str
from shared.infra.redis.keys import Keys
from shared.infra.store.array_pack import pack, unpack
from shared.infra.store.half_rows import DTYPE, HalfRows
from shared.infra.store.index_snapshots import DEFAULT_SNAPSHOT_BYTES, IndexSnapshots, version_tag
from shared.infra.store.lru import CACHED_TENANTS, LRU
from shared.infra.store.stale_reads import stale_after

log = logging.getLogger(__name__)

BLOCK_BYTES = 32 * 2**20  # one block (a Redis string) at most
WRITE_BATCH = 1000  # vectors per script call
READS_BEFORE_UNCACHED = 3  # reads retried while writes change the collection; then used once, not cached
_ROWIDS_FORMAT = b"rowids/2"  # the row-id snapshot's layout: bumped when it changes (older ones then go unused)

# KEYS: rows, layout, free list, meta, version, the block key prefix (a key of the same slot, never written
# itself), the earlier layout's hash. ARGV[1] row bytes, ARGV[2] rows per block (used when the collection is new),
# ARGV[3] "1" to move the earlier layout: only ids it still holds (not deleted meanwhile) and the blocks do not
# (a vector written since is newer), then id, vector bytes, payload
_UPSERT = """
local rowbytes, per_block = tonumber(ARGV[1]), tonumber(ARGV[2])
local stored = redis.call('HGET', KEYS[2], 'rowbytes')
if stored and tonumber(stored) ~= rowbytes then
  return redis.error_reply('GFDIM ' .. stored)
end
if not stored then redis.call('HSET', KEYS[2], 'rowbytes', rowbytes, 'per_block', per_block) end
per_block = tonumber(redis.call('HGET', KEYS[2], 'per_block'))
for i = 4, #ARGV, 3 do
  local id = ARGV[i]
  local row = redis.call('HGET', KEYS[1], id)
  if ARGV[3] ~= '1' or (not row and redis.call('HEXISTS', KEYS[7], id) == 1) then
    if not row then
      row = redis.call('LPOP', KEYS[3]) or (redis.call('HINCRBY', KEYS[2], 'rows', 1) - 1)
      redis.call('HSET', KEYS[1], id, row)
    end
    row = tonumber(row)
    redis.call('SETRANGE', KEYS[6] .. math.floor(row / per_block), (row % per_block) * rowbytes, ARGV[i + 1])
    redis.call('HSET', KEYS[4], id, ARGV[i + 2])
  end
end
return redis.call('INCR', KEYS[5])
"""
# KEYS: rows, free list, meta, version, the earlier layout's hash; ARGV: ids. A deleted id's row is freed (its
# bytes stay until reused: no reader maps that row any more).
_DELETE = """
for i = 1, #ARGV do
  local row = redis.call('HGET', KEYS[1], ARGV[i])
  if row then
    redis.call('HDEL', KEYS[1], ARGV[i])
    redis.call('RPUSH', KEYS[2], row)
  end
  redis.call('HDEL', KEYS[3], ARGV[i])
  redis.call('HDEL', KEYS[5], ARGV[i])
end
return redis.call('INCR', KEYS[4])
"""


class VectorDimensionError(ValueError):
    """Vectors of another dimension than the collection's: refused, never mixed."""


class RedisVectorStore:
    def __init__(self, redis, snapshot_bytes: int = DEFAULT_SNAPSHOT_BYTES):
        """``snapshot_bytes``: the largest row-id snapshot stored (0: none stored or read)."""
        self.redis = redis
        self.snapshots = IndexSnapshots(redis, snapshot_bytes) if snapshot_bytes > 0 else None
        # (version, id per stored row ("" for a free one), the rows, the free rows' numbers, the graph's epoch)
        self._cache: LRU[tuple[str, str], tuple[int, StringTable, HalfRows, np.ndarray, bytes | None]] = LRU(
            CACHED_TENANTS * len(KINDS))
        self.loads = 0  # collections read from Redis by this process (a cold search or a warm-up)
        self.rowid_snapshot_loads = 0  # of those, the ones whose row ids came from their snapshot

    def upsert(self, tenant: str, kind: str, items: Sequence[VectorItem]) -> None:
        if items:
            self._write(tenant, kind, [(it.id, _normalise(it.vector), json.dumps(it.payload)) for it in items])

    def _write(self, tenant: str, kind: str, rows: list[tuple[str, np.ndarray, str]], only_new: bool = False) -> None:
        k = Keys(tenant)
        dims = {len(v) for _, v, _ in rows}
        if len(dims) > 1:
            raise VectorDimensionError(f"vectors of tenant {tenant} ({kind}) differ in dimension: {sorted(dims)}")
        rowbytes = dims.pop() * np.dtype(DTYPE).itemsize
        keys = [k.vector_rows(kind), k.vector_layout(kind), k.vector_free(kind), k.vector_meta(kind),
                k.vector_version(kind), k.vector_block(kind, 0)[:-1], k.vectors(kind)]
        for i in range(0, len(rows), WRITE_BATCH):
            args: list = [rowbytes, max(1, BLOCK_BYTES // rowbytes), "1" if only_new else "0"]
            for item_id, vector, payload in rows[i : i + WRITE_BATCH]:
                args.extend((item_id, vector.astype(DTYPE).tobytes(), payload))
            try:
                self.redis.eval(_UPSERT, len(keys), *keys, *args)
            except Exception as exc:
                if "GFDIM" not in str(exc):
                    raise
                stored = int(str(exc).split("GFDIM", 1)[1].split()[0]) // np.dtype(DTYPE).itemsize
                raise VectorDimensionError(
                    f"tenant {tenant} holds {kind} vectors of {stored} dimensions; refusing vectors of "
                    f"{rowbytes // np.dtype(DTYPE).itemsize} (re-embed the tenant: its vectors are dropped first)"
                ) from exc

    def delete(self, tenant: str, kind: str, ids: Iterable[str]) -> None:
        ids = list(ids)
        k = Keys(tenant)
        for i in range(0, len(ids), WRITE_BATCH):
            self.redis.eval(_DELETE, 5, k.vector_rows(kind), k.vector_free(kind), k.vector_meta(kind),
                            k.vector_version(kind), k.vectors(kind), *ids[i : i + WRITE_BATCH])

    def count(self, tenant: str, kind: str) -> int:
        k = Keys(tenant)
        return self.redis.hlen(k.vector_rows(kind)) or self.redis.hlen(k.vectors(kind))

    def drop_tenant(self, tenant: str) -> None:
        k = Keys(tenant)
        for kind in (*KINDS, NAME_VECTORS):
            self.redis.delete(*self._block_keys(k, kind), k.vector_rows(kind), k.vector_layout(kind),
                              k.vector_free(kind), k.vectors(kind), k.vector_meta(kind),
                              k.index_snapshot(rowids_kind(kind)))
            self.redis.incr(k.vector_version(kind))

    def payloads(self, tenant: str, kind: str) -> dict[str, dict]:
        """Every stored item's payload by id."""
        return {to_str(i): json.loads(p) for i, p in self.redis.hgetall(Keys(tenant).vector_meta(kind)).items()}

    def vectors(self, tenant: str, kind: str) -> dict[str, np.ndarray]:
        """Every stored item's vector (normalised, float32) by id, as searches see them."""
        _version, ids, rows, free = self._load(tenant, kind)
        return {ids[i]: rows.row(i) for i in np.flatnonzero(_live(len(ids), free)).tolist()}

    def search(
        self, tenant: str, kind: str, vector: Sequence[float], top_k: int, min_score: float = -1.0
    ) -> list[VectorHit]:
        _version, ids, rows, free = self._load(tenant, kind)
        if len(ids) == len(free) or top_k <= 0:
            return []
        query = _normalise(vector)
        if query.shape[0] != rows.dims:
            raise ValueError(f"query dimension {query.shape[0]} != stored dimension {rows.dims}")
        # a free row's bytes are a deleted vector's (or zeros): never a hit
        numbers, scores = rows.candidates(query, top_k, free)
        ranked = np.lexsort((np.array([ids[i] for i in numbers.tolist()]), -scores))[:top_k]
        top = [int(numbers[j]) for j in ranked if scores[j] >= min_score]
        score = dict(zip(numbers.tolist(), scores.tolist(), strict=True))
        # the hits' payloads, read now: a deleted item's payload is gone, its hit keeps an empty one
        raw = self.redis.hmget(Keys(tenant).vector_meta(kind), [ids[i] for i in top]) if top else []
        return [VectorHit(ids[i], score[i], json.loads(p) if p else {}) for i, p in zip(top, raw, strict=True)]

    def _load(self, tenant: str, kind: str) -> tuple[int, StringTable, HalfRows, np.ndarray]:
        """(version, ids, rows, free rows) of the tenant's collection now; inside ``stale_reads.serving_stale``,
        those of an earlier version of the same graph while the current one is read behind the caller."""
        k = Keys(tenant)
        raw, epoch = self.redis.mget([k.vector_version(kind), k.graph_epoch()])
        version = int(raw or 0)
        entry = self._cache.get_or_build(  # the epoch: a tenant deleted and rebuilt counts its versions again
            (tenant, kind), lambda hit: hit[0] == version and hit[4] == epoch, lambda: self._read(tenant, kind),
            stale_after(), lambda hit: epoch is not None and hit[4] == epoch and 0 <= hit[0] <= version)
        return entry[:4]

    def _version(self, k: Keys, kind: str) -> tuple[int, str, bytes | None]:
        """(the collection's version counter, the row-id snapshot tag: that counter and the graph's epoch, so a
        tenant deleted and rebuilt, whose counter starts again, never meets an earlier snapshot; the epoch)."""
        version, epoch = self.redis.mget([k.vector_version(kind), k.graph_epoch()])
        return int(version or 0), version_tag(version, epoch), epoch

    def _read(self, tenant: str, kind: str):
        """(version, ids, rows, free rows, the graph's epoch) read in bulk. Read again while a write changes the
        collection meanwhile; after ``READS_BEFORE_UNCACHED`` tries the last read is used with version -1, so the
        next search reads again. Only a read no write raced stores its row ids' snapshot."""
        k = Keys(tenant)
        if self.redis.exists(k.vectors(kind)):
            self._move_earlier_layout(tenant, kind)
        version, tag, epoch = self._version(k, kind)  # before the rows: a snapshot is never tagged newer than its ids
        for _attempt in range(READS_BEFORE_UNCACHED):
            self.loads += 1
            ids, free, rows, store = self._read_rows(k, kind, tag)
            now, now_tag, epoch = self._version(k, kind)
            if now_tag == tag:
                break
            version, tag = now, now_tag
        else:
            return -1, ids, rows, free, epoch
        if store:
            self._store_rowids(k, kind, tag, ids, free, store == "damaged")
        return version, ids, rows, free, epoch

    def _read_rows(self, k: Keys, kind: str, tag: str) -> tuple[StringTable, np.ndarray, HalfRows, str]:
        """(the id of each stored row, "" for a free one; the free rows' numbers; the rows; "" when the ids came
        from their snapshot (or there are none), else why it is to be stored: "missing" or "damaged"). The rows
        are the blocks as read, in their own order: no gather, no joined copy and no cast."""
        # first: every row the ids name is in the blocks read after
        snapshot, why = self._load_rowids(k, kind, tag)
        rows = None if snapshot else self.redis.hgetall(k.vector_rows(kind))
        rowbytes, per_block, allocated = (int(v or 0) for v in self.redis.hmget(
            k.vector_layout(kind), ["rowbytes", "per_block", "rows"]))
        if not (snapshot or rows) or not rowbytes:
            return StringTable.of([]), np.zeros(0, dtype=np.int64), HalfRows([], 0), ""
        if snapshot:
            ids, free = snapshot
            allocated = len(ids)  # the rows of the snapshot's version (a later write changes the version too)
        else:
            ids, free = _rowids_of(rows, allocated, k, kind)
        blocks = [read_value(self.redis, "GET", key) or b"" for key in self._block_keys(k, kind, allocated, per_block)]
        return ids, free, HalfRows.of_blocks(blocks, allocated, rowbytes // np.dtype(DTYPE).itemsize, per_block), why

    def _load_rowids(self, k: Keys, kind: str, tag: str) -> tuple[tuple[StringTable, np.ndarray] | None, str]:
        """((ids, free rows) from the snapshot stored for ``tag``, or None; "missing" or "damaged" when None)."""
        if self.snapshots is None:
            return None, ""
        try:
            data = self.snapshots.load(k.tenant, rowids_kind(kind), tag)
            if data is None:
                return None, "missing"
            got = _rowids_from_bytes(data)
        except Exception:  # noqa: BLE001 - a damaged snapshot is read past (the hash has the ids), never an error
            log.warning("row-id snapshot %s of tenant %s unreadable: reading the rows", kind, k.tenant, exc_info=True)
            return None, "damaged"
        self.rowid_snapshot_loads += 1
        return got, ""

    def _store_rowids(self, k: Keys, kind: str, tag: str, ids: StringTable, free: np.ndarray, damaged: bool) -> None:
        """Store the ids read for ``tag`` as its snapshot, unless another process stored it meanwhile."""
        try:
            if damaged or self.snapshots.stored_tag(k.tenant, rowids_kind(kind)) != tag:
                self.snapshots.save(k.tenant, rowids_kind(kind), tag, _rowids_to_bytes(ids, free))
        except Exception:  # noqa: BLE001 - the ids are read; only the next cold process reads the hash again
            log.warning("could not store the row-id snapshot %s of tenant %s", kind, k.tenant, exc_info=True)

    def _block_keys(self, k: Keys, kind: str, allocated: int | None = None, per_block: int | None = None) -> list[str]:
        if allocated is None:
            per_block, allocated = (int(v or 0) for v in self.redis.hmget(k.vector_layout(kind),
                                                                          ["per_block", "rows"]))
        blocks = -(-allocated // per_block) if per_block else 0
        return [k.vector_block(kind, b) for b in range(blocks)]

    def _move_earlier_layout(self, tenant: str, kind: str) -> None:
        """Store a collection of the earlier layout (float32 bytes by id) in the blocks, then drop its hash: ids
        the blocks hold already keep their vector (written since, so newer)."""
        k = Keys(tenant)
        cursor = 0
        while True:
            cursor, batch = self.redis.hscan(k.vectors(kind), cursor, count=WRITE_BATCH)
            if batch:
                ids = [to_str(i) for i in batch]
                payloads = self.redis.hmget(k.vector_meta(kind), ids)
                self._write(tenant, kind, [(i, _normalise(np.frombuffer(v, dtype=np.float32)), to_str(p or "{}"))
                                           for i, v, p in zip(ids, batch.values(), payloads, strict=True)],
                            only_new=True)
            if cursor == 0:
                break
        self.redis.delete(k.vectors(kind))

    def sample_vector(self, tenant: str, kind: str) -> np.ndarray | None:
        """One of the tenant's stored vectors of ``kind`` (the first by id), or None when it has none: a
        question's stand-in for a warm-up that must not call the embedding API (``shared.infra.store.warmup``)."""
        got = self.sample_item(tenant, kind)
        return None if got is None else np.asarray(got[1], dtype=np.float32)

    def sample_item(self, tenant: str, kind: str) -> tuple[str, list[float]] | None:
        """(id, vector) of one stored item of ``kind`` (the first by id), or None: which embedder made the
        tenant's vectors is told by embedding that item's text again (``shared.infra.store.embedder_record``)."""
        _version, ids, rows, free = self._load(tenant, kind)
        if len(ids) == len(free):
            return None
        order = ids.arrays()[2]  # the rows by id (empty: in row order already)
        order = order if order.size else np.arange(len(ids))
        first = int(order[_live(len(ids), free)[order]][0])
        return ids[first], rows.row(first).tolist()

    def warm_kind(self, tenant: str, kind: str) -> None:
        """Load the tenant's rows of ``kind`` now when stale, so the next search finds it ready
        (``index_loads``)."""
        self._load(tenant, kind)


def rowids_kind(kind: str) -> str:
    return f"rowids-{kind}"  # the snapshot's kind (``Keys.index_snapshot``)


def _live(n: int, free: np.ndarray) -> np.ndarray:
    """Mask of the rows that hold a vector."""
    mask = np.ones(n, dtype=bool)
    mask[free] = False
    return mask


def _rowids_of(rows: dict[bytes, bytes], allocated: int, k: Keys, kind: str) -> tuple[StringTable, np.ndarray]:
    """(the id of each row, "" for a free one; the free rows) from the id -> row hash. The ids stay the UTF-8
    bytes Redis sent: the table decodes one when it is read."""
    numbers = np.fromiter(map(int, rows.values()), dtype=np.int64, count=len(rows))
    if numbers.size and (int(numbers.min()) < 0 or int(numbers.max()) >= allocated):
        raise ValueError(f"vectors of tenant {k.tenant} ({kind}) name rows beyond their blocks")
    names = [b""] * allocated
    for number, name in zip(numbers.tolist(), rows, strict=True):
        names[number] = name
    named = np.zeros(allocated, dtype=bool)
    named[numbers] = True
    free = np.flatnonzero(~named)  # listed, not inferred from "": an id may itself be ""
    return StringTable.of_utf8(names), free


def _rowids_to_bytes(ids: StringTable, free: np.ndarray) -> bytes:
    """The row ids' snapshot: the table's arrays and the free rows (``array_pack``: numbers only)."""
    blob, ends, order = ids.arrays()
    return pack({"format": np.frombuffer(_ROWIDS_FORMAT, dtype=np.uint8), "blob": blob, "ends": ends,
                 "order": order, "free": free})


def _rowids_from_bytes(data: bytes) -> tuple[StringTable, np.ndarray]:
    """``ValueError`` when ``data`` is no row-id snapshot of this format."""
    a = unpack(data)
    try:
        if a["format"].tobytes() != _ROWIDS_FORMAT:
            raise ValueError("not a row-id snapshot of this format")
        ids = StringTable.from_arrays(a["blob"], a["ends"], a["order"])
        free = np.asarray(a["free"], dtype=np.int64)
    except KeyError as exc:
        raise ValueError(f"row-id snapshot lacks {exc}") from exc
    if free.ndim != 1 or (free.size and (int(free.min()) < 0 or int(free.max()) >= len(ids))):
        raise ValueError("free rows beyond the row ids")
    return ids, free


def _normalise(vector: Sequence[float]) -> np.ndarray:
    arr = np.asarray(vector, dtype=np.float32)
    norm = float(np.linalg.norm(arr))
    return arr / norm if norm > 0 else arr
