"""Embedded vector store: vectors in Redis (reachable by every worker process), searched with numpy.

Each process caches a tenant/kind matrix and reloads it only when the collection's version
counter changes, so repeated searches cost one GET plus a matrix-vector product. The matrices are not
snapshotted (``index_snapshots``): a snapshot would be a second copy of every vector in Redis, for the second or so
a cold process spends reading them.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence

import numpy as np

from shared.domain.storage import NAME_VECTORS, VectorHit, VectorItem
from shared.domain.storage import VECTOR_KINDS as KINDS
from shared.infra.redis.conn import to_str
from shared.infra.redis.keys import Keys
from shared.infra.store.lru import CACHED_TENANTS, LRU


class RedisVectorStore:
    def __init__(self, redis):
        self.redis = redis
        self._cache: LRU[tuple[str, str], tuple[int, list[str], np.ndarray, dict]] = LRU(CACHED_TENANTS * len(KINDS))
        self._lock = threading.Lock()
        self.loads = 0  # matrices read from Redis by this process (a cold search or a warm-up)

    def upsert(self, tenant: str, kind: str, items: Sequence[VectorItem]) -> None:
        if not items:
            return
        k = Keys(tenant)
        pipe = self.redis.pipeline(transaction=True)
        for i in range(0, len(items), 1000):
            batch = items[i : i + 1000]
            pipe.hset(k.vectors(kind), mapping={it.id: _normalise(it.vector).tobytes() for it in batch})
            pipe.hset(k.vector_meta(kind), mapping={it.id: json.dumps(it.payload) for it in batch})
        pipe.incr(k.vector_version(kind))
        pipe.execute()

    def delete(self, tenant: str, kind: str, ids: Iterable[str]) -> None:
        ids = list(ids)
        if not ids:
            return
        k = Keys(tenant)
        pipe = self.redis.pipeline(transaction=True)
        pipe.hdel(k.vectors(kind), *ids)
        pipe.hdel(k.vector_meta(kind), *ids)
        pipe.incr(k.vector_version(kind))
        pipe.execute()

    def count(self, tenant: str, kind: str) -> int:
        return self.redis.hlen(Keys(tenant).vectors(kind))

    def drop_tenant(self, tenant: str) -> None:
        k = Keys(tenant)
        for kind in (*KINDS, NAME_VECTORS):
            self.redis.delete(k.vectors(kind), k.vector_meta(kind))
            self.redis.incr(k.vector_version(kind))

    def payloads(self, tenant: str, kind: str) -> Mapping[str, dict]:
        return self._load(tenant, kind)[3]

    def search(
        self, tenant: str, kind: str, vector: Sequence[float], top_k: int, min_score: float = -1.0
    ) -> list[VectorHit]:
        _version, ids, matrix, meta = self._load(tenant, kind)
        if not ids or top_k <= 0:
            return []
        query = _normalise(vector)
        if query.shape[0] != matrix.shape[1]:
            raise ValueError(f"query dimension {query.shape[0]} != stored dimension {matrix.shape[1]}")
        scores = matrix @ query
        k = min(top_k, len(ids))
        top = np.argpartition(-scores, k - 1)[:k]
        top = top[np.lexsort((np.array([ids[i] for i in top]), -scores[top]))]
        return [VectorHit(ids[i], float(scores[i]), meta.get(ids[i], {})) for i in top if scores[i] >= min_score]

    def _load(self, tenant: str, kind: str):
        version = int(self.redis.get(Keys(tenant).vector_version(kind)) or 0)
        return self._cache.get_or_build((tenant, kind), lambda entry: entry[0] == version,
                                        lambda: self._read(tenant, kind, version), self._lock)

    def _read(self, tenant: str, kind: str, version: int):
        self.loads += 1
        k = Keys(tenant)
        raw = self.redis.hgetall(k.vectors(kind))
        meta_raw = self.redis.hgetall(k.vector_meta(kind))
        keys = sorted(raw)  # UTF-8 bytes sort as their strings do
        rows = [raw[key] for key in keys]
        ids = [to_str(key) for key in keys]
        if len({len(r) for r in rows}) > 1:
            raise ValueError(f"vectors of tenant {tenant} ({kind}) differ in dimension")
        if ids:
            matrix = np.frombuffer(b"".join(rows), dtype=np.float32).reshape(len(ids), -1)
        else:
            matrix = np.zeros((0, 0), dtype=np.float32)
        return version, ids, matrix, Payloads(meta_raw)

    def sample_vector(self, tenant: str, kind: str) -> np.ndarray | None:
        """One of the tenant's stored vectors of ``kind`` (the first by id), or None when it has none: a
        question's stand-in for a warm-up that must not call the embedding API (``shared.infra.store.warmup``)."""
        _version, ids, matrix, _meta = self._load(tenant, kind)
        return matrix[0].copy() if ids else None

    def sample_item(self, tenant: str, kind: str) -> tuple[str, list[float]] | None:
        """(id, vector) of one stored item of ``kind`` (the first by id), or None: which embedder made the
        tenant's vectors is told by embedding that item's text again (``shared.infra.store.embedder_record``)."""
        _version, ids, matrix, _meta = self._load(tenant, kind)
        return (ids[0], matrix[0].tolist()) if ids else None

    def warm(self, tenant: str) -> None:
        """Load the tenant's stale matrices now, so the next search finds them ready."""
        for kind in KINDS:
            self._load(tenant, kind)


def _normalise(vector: Sequence[float]) -> np.ndarray:
    arr = np.asarray(vector, dtype=np.float32)
    norm = float(np.linalg.norm(arr))
    return arr / norm if norm > 0 else arr


class Payloads(Mapping[str, dict]):
    """A matrix's payloads by id, each parsed from its stored JSON when first asked for: a search reads the few of its
    hits, and a cold process no longer parses one JSON object per vector before its first search."""

    def __init__(self, raw: dict[bytes, bytes]):
        self._raw, self._parsed = raw, {}

    def __getitem__(self, item_id: str) -> dict:
        got = self._parsed.get(item_id)
        if got is None:
            got = self._parsed[item_id] = json.loads(self._raw[item_id.encode()])
        return got

    def __iter__(self) -> Iterator[str]:
        return (to_str(k) for k in self._raw)

    def __len__(self) -> int:
        return len(self._raw)
