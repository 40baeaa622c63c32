"""Weaviate vector store (weaviate-client v4, server >= 1.27): the VectorStore protocol on native multi-tenancy.

One collection per kind (``GraphfleetEntities``, ``GraphfleetChunks``, ...), one Weaviate tenant per
graphfleet tenant (created on first write by ``auto_tenant_creation``), self-provided vectors in a
named vector ``default`` with cosine distance, deterministic uuid5 ids from (kind, id) so upserts are
idempotent. Imports go through ``data.insert_many`` in fixed-size batches (synchronous gRPC calls whose
per-object ``errors`` are checked; ``batch.fixed_size`` would add background threads inside a Celery task and
report failures only after the context exits); failed objects raise :class:`WeaviateBatchError`.
A collection takes no dimensions of its own: each tenant's shard takes those of its first vectors, so the
dimensions follow the embedder; when a tenant's embedder changes, the index stage drops the tenant
(``drop_tenant``: its shards go) before storing the new embedder's vectors (``shared.pipeline.reembed``).
The client (HTTP + gRPC channels) is created lazily, on first use, in each process (never across a fork).

When given the Redis connection, writes bump the same per-tenant collection version counter as the
embedded store, so per-process caches keyed on it (``shared.infra.store.bm25_cache``) see the change.
"""

from __future__ import annotations

import atexit
import hashlib
import json
import os
import re
import threading
import uuid
from collections.abc import Callable, Iterable, Sequence
from urllib.parse import urlparse

from shared.domain.storage import NAME_VECTORS, VectorHit, VectorItem

VECTOR_NAME = "default"
COLLECTION_PREFIX = "Graphfleet"
COLLECTIONS = {"entities": "GraphfleetEntities", "chunks": "GraphfleetChunks"}
ID_NAMESPACE = uuid.UUID("6f1c1f9e-5d55-4c1b-9a8f-6a7c3b0f2a11")
BATCH_SIZE = 200  # objects per insert_many / delete_many call (one gRPC message stays well under 10 MB)
MAX_QUERY_RESULTS = 10_000  # Weaviate's QUERY_MAXIMUM_RESULTS default
MAX_TENANT_LEN = 64
_PASSTHROUGH = re.compile(r"[a-z0-9_-]")
_WEAVIATE_TENANT = re.compile(r"^[A-Za-z0-9_-]{1,64}$")  # Weaviate's ShardNameRegexCore
_RETURN_PROPERTIES = ["item_id", "payload_json"]


class WeaviateBatchError(RuntimeError):
    """An import had failed objects: ``failed_ids`` names them all, ``errors`` has (id, message) of the first."""

    def __init__(self, failed_ids: list[str], total: int, errors: list[tuple[str, str]]):
        shown = "; ".join(f"{i}: {msg}" for i, msg in errors)
        more = f" (+{len(failed_ids) - len(errors)} more)" if len(failed_ids) > len(errors) else ""
        super().__init__(f"{len(failed_ids)}/{total} objects failed to import: {shown}{more}")
        self.failed_ids = failed_ids
        self.errors = errors


def weaviate_tenant(tenant: str) -> str:
    """Deterministic, collision-free tenant name in Weaviate's alphabet ``[A-Za-z0-9_-]{1,64}``.

    ``[a-z0-9_-]`` pass through (every valid graphfleet tenant maps to itself); any other character
    becomes ``X<uppercase hex code point>X``. Passthrough output never contains an uppercase letter, so
    the encoding is prefix-free and decodable (:func:`graphfleet_tenant`), hence injective. Names that
    would exceed 64 characters become ``H`` + 63 hex chars of SHA-256 (distinct from every encoded name,
    which never starts with ``H``).
    """
    if not tenant:
        raise ValueError("empty tenant")
    out = "".join(ch if _PASSTHROUGH.fullmatch(ch) else f"X{ord(ch):X}X" for ch in tenant)
    if len(out) > MAX_TENANT_LEN:
        out = "H" + hashlib.sha256(tenant.encode()).hexdigest()[: MAX_TENANT_LEN - 1]
    if not _WEAVIATE_TENANT.match(out):  # cannot happen; a guard against edits to the alphabet above
        raise ValueError(f"tenant {tenant!r} mapped to invalid Weaviate tenant {out!r}")
    return out


def graphfleet_tenant(name: str) -> str | None:
    """Inverse of :func:`weaviate_tenant`; None for hashed (over-long) names. ValueError if not an encoding."""
    if name.startswith("H"):
        return None
    out, i = [], 0
    while i < len(name):
        if name[i] == "X":
            end = name.find("X", i + 1)
            try:
                out.append(chr(int(name[i + 1 : end], 16)) if end > 0 else "")
            except (ValueError, OverflowError):
                end = -1
            if end < 0:
                raise ValueError(f"not an encoded tenant: {name!r}")
            i = end + 1
        else:
            out.append(name[i])
            i += 1
    tenant = "".join(out)
    if not tenant or weaviate_tenant(tenant) != name:
        raise ValueError(f"not an encoded tenant: {name!r}")
    return tenant


def collection_name(kind: str) -> str:
    if kind in COLLECTIONS:
        return COLLECTIONS[kind]
    if not re.fullmatch(r"[a-z][a-z0-9_]*", kind):
        raise ValueError(f"invalid vector kind {kind!r}")
    return COLLECTION_PREFIX + "".join(part.capitalize() for part in kind.split("_"))


def object_id(kind: str, item_id: str) -> str:
    """Deterministic uuid5 of (kind, id): re-importing an item overwrites it (same algorithm as generate_uuid5)."""
    return str(uuid.uuid5(ID_NAMESPACE, f"{kind}\x1f{item_id}"))


def properties_of(item: VectorItem) -> dict:
    """Stored properties: the item id, filterable name/doc_id, ``text`` for native BM25, the payload as JSON."""
    p = item.payload or {}
    return {
        "item_id": item.id,
        "name": str(p.get("name") or ""),
        "doc_id": str(p.get("doc_id") or ""),
        "text": str(p.get("text") or p.get("description") or p.get("name") or ""),
        "payload_json": json.dumps(p, ensure_ascii=False, sort_keys=True),
    }


def batch_failures(result, items: Sequence[VectorItem]) -> list[tuple[str, str]]:
    """(item id, message) of the failed objects of an ``insert_many`` result (``BatchObjectReturn.errors``)."""
    errors = getattr(result, "errors", None) or {}
    return [(items[i].id if 0 <= i < len(items) else f"#{i}", str(getattr(e, "message", e)))
            for i, e in sorted(errors.items())]


def _connect_from_settings(settings):
    import weaviate
    from weaviate.classes.init import AdditionalConfig, Auth, Timeout

    url = urlparse(settings.weaviate_url or "http://localhost:8080")
    secure = url.scheme == "https"
    host = url.hostname or "localhost"
    auth = Auth.api_key(settings.weaviate_api_key) if settings.weaviate_api_key else None
    return weaviate.connect_to_custom(
        http_host=host, http_port=url.port or (443 if secure else 8080), http_secure=secure,
        grpc_host=host, grpc_port=settings.weaviate_grpc_port, grpc_secure=secure,
        auth_credentials=auth, additional_config=AdditionalConfig(timeout=Timeout(init=30, query=60, insert=120)),
    )


def collection_config(name: str) -> dict:
    """Keyword arguments of ``client.collections.create`` for one kind's collection."""
    from weaviate.classes.config import Configure, DataType, Property, Tokenization, VectorDistances

    keyword = {"data_type": DataType.TEXT, "skip_vectorization": True, "index_searchable": False,
               "tokenization": Tokenization.FIELD}
    props = [Property(name=n, **keyword) for n in ("item_id", "name", "doc_id")]
    props.append(Property(name="payload_json", data_type=DataType.TEXT, index_filterable=False,
                          index_searchable=False, skip_vectorization=True))
    props.append(Property(name="text", data_type=DataType.TEXT, tokenization=Tokenization.WORD,
                          skip_vectorization=True))
    index = Configure.VectorIndex.hnsw(distance_metric=VectorDistances.COSINE)
    vectors = getattr(Configure, "Vectors", None)
    if vectors is not None and hasattr(vectors, "self_provided"):  # client >= 4.16
        vector = {"vector_config": vectors.self_provided(name=VECTOR_NAME, vector_index_config=index)}
    else:
        vector = {"vectorizer_config": [Configure.NamedVectors.none(name=VECTOR_NAME, vector_index_config=index)]}
    return {
        "name": name,
        "properties": props,
        "multi_tenancy_config": Configure.multi_tenancy(
            enabled=True, auto_tenant_creation=True, auto_tenant_activation=True),
        **vector,
    }


class WeaviateVectorStore:
    def __init__(self, connect: Callable[[], object], batch_size: int = BATCH_SIZE, redis=None):
        """``connect()`` returns a connected ``weaviate.WeaviateClient``; it is called lazily, per process."""
        self._connect = connect
        self.batch_size = batch_size
        self.redis = redis
        self._client = None
        self._pid: int | None = None
        self._ready: set[str] = set()
        self._tenants: set[tuple[str, str]] = set()  # (collection, tenant) known to exist in this process
        self._lock = threading.Lock()

    @classmethod
    def from_settings(cls, settings, redis=None) -> WeaviateVectorStore:
        """No connection here: the client is built on first use in the process that uses it."""
        if not settings.weaviate_url:
            raise RuntimeError("GRAPHFLEET_VECTOR_BACKEND=weaviate needs GRAPHFLEET_WEAVIATE_URL")
        return cls(lambda: _connect_from_settings(settings), redis=redis)

    # ------------------------------------------------------------ connection and schema
    def client(self):
        if self._client is None or self._pid != os.getpid():
            with self._lock:
                if self._client is None or self._pid != os.getpid():
                    # never close a client inherited through fork: its sockets belong to the parent
                    self._client, self._pid = self._connect(), os.getpid()
                    self._ready, self._tenants = set(), set()
                    atexit.register(self.close)  # close() leaves clients of other processes alone
        return self._client

    def close(self) -> None:
        if self._client is not None and self._pid == os.getpid():
            self._client.close()
        self._client = None

    def _collection(self, kind: str, create: bool = False):
        name = collection_name(kind)
        client = self.client()
        if name not in self._ready:
            if not client.collections.exists(name):
                if not create:
                    return None
                self._create(client, name)
            self._ready.add(name)
        return client.collections.get(name)

    @staticmethod
    def _create(client, name: str) -> None:
        from weaviate.exceptions import UnexpectedStatusCodeError

        try:
            client.collections.create(**collection_config(name))
        except UnexpectedStatusCodeError:  # another worker created it first (422 "already exists")
            if not client.collections.exists(name):
                raise

    def _tenant_coll(self, tenant: str, kind: str, create: bool = False):
        coll = self._collection(kind, create=create)
        if coll is None:
            return None
        name = weaviate_tenant(tenant)
        key = (coll.name, name)
        if not create and key not in self._tenants:
            if not coll.tenants.exists(name):
                return None
            self._tenants.add(key)
        return coll.with_tenant(name)

    def _read(self, tenant: str, kind: str, op, empty):
        """Run a read on the tenant's collection; a tenant dropped by another process reads as empty."""
        coll = self._tenant_coll(tenant, kind)
        if coll is None:
            return empty
        try:
            return op(coll)
        except Exception:
            self._tenants.discard((coll.name, weaviate_tenant(tenant)))
            if self._tenant_coll(tenant, kind) is None:
                return empty
            raise

    def _changed(self, tenant: str, kind: str) -> None:
        if self.redis is not None:
            from shared.infra.redis.keys import Keys

            self.redis.incr(Keys(tenant).vector_version(kind))

    # ------------------------------------------------------------ VectorStore protocol
    def upsert(self, tenant: str, kind: str, items: Sequence[VectorItem]) -> None:
        """Import in batches; every batch is attempted, then failures raise :class:`WeaviateBatchError`.

        Retrying the whole call is safe: ids are deterministic, so the objects that did land are overwritten.
        """
        if not items:
            return
        coll = self._tenant_coll(tenant, kind, create=True)
        failures: list[tuple[str, str]] = []
        for start in range(0, len(items), self.batch_size):
            failures += self._insert(coll, kind, items[start : start + self.batch_size])
        self._changed(tenant, kind)
        if failures:
            raise WeaviateBatchError([i for i, _ in failures], len(items), failures[:3])

    @staticmethod
    def _insert(coll, kind: str, batch: Sequence[VectorItem]) -> list[tuple[str, str]]:
        from weaviate.classes.data import DataObject
        from weaviate.exceptions import WeaviateInsertManyAllFailedError

        objects = [
            DataObject(properties=properties_of(it), uuid=object_id(kind, it.id),
                       vector={VECTOR_NAME: [float(x) for x in it.vector]})
            for it in batch
        ]
        try:
            result = coll.data.insert_many(objects)
        except WeaviateInsertManyAllFailedError as exc:  # raised instead of a result when nothing landed
            return [(it.id, str(exc)) for it in batch]
        return batch_failures(result, batch)

    def search(
        self, tenant: str, kind: str, vector: Sequence[float], top_k: int, min_score: float = -1.0
    ) -> list[VectorHit]:
        """Nearest neighbours by cosine similarity (1 - Weaviate's cosine distance), best first."""
        from weaviate.classes.query import MetadataQuery

        if top_k <= 0:
            return []

        def op(coll):
            return coll.query.near_vector(
                near_vector=[float(x) for x in vector], limit=min(top_k, MAX_QUERY_RESULTS),
                target_vector=VECTOR_NAME, distance=(1.0 - min_score) if min_score > -1.0 else None,
                return_metadata=MetadataQuery(distance=True), return_properties=_RETURN_PROPERTIES,
            ).objects

        hits = [_hit(o, 1.0 - float(o.metadata.distance)) for o in self._read(tenant, kind, op, [])]
        return sorted((h for h in hits if h.score >= min_score - 1e-6), key=lambda h: (-h.score, h.id))

    def hybrid_search(
        self, tenant: str, kind: str, query_text: str, vector: Sequence[float] | None, top_k: int,
        alpha: float = 0.5, min_score: float = -1.0,
    ) -> list[VectorHit]:
        """Weaviate's native hybrid: BM25 on ``text`` fused with vector search (``alpha`` = vector share).

        ``score`` is the fused score in [0, 1]; ``min_score`` (cosine) bounds the vector side through
        ``max_vector_distance``. Called by ``shared.domain.retrieval.hybrid.hybrid_search`` when no BM25 index is given.
        """
        from weaviate.classes.query import HybridFusion, MetadataQuery

        if top_k <= 0:
            return []
        if vector is None:
            alpha = 0.0  # no vectorizer module: without a query vector the search is keyword-only

        def op(coll):
            return coll.query.hybrid(
                query=query_text, alpha=alpha, limit=min(top_k, MAX_QUERY_RESULTS), query_properties=["text"],
                vector=[float(x) for x in vector] if vector is not None else None, target_vector=VECTOR_NAME,
                fusion_type=HybridFusion.RELATIVE_SCORE,
                max_vector_distance=(1.0 - min_score) if min_score > -1.0 else None,
                return_metadata=MetadataQuery(score=True), return_properties=_RETURN_PROPERTIES,
            ).objects

        hits = [_hit(o, float(o.metadata.score or 0.0)) for o in self._read(tenant, kind, op, [])]
        return sorted(hits, key=lambda h: (-h.score, h.id))

    def delete(self, tenant: str, kind: str, ids: Iterable[str]) -> None:
        """Delete by item ids (document deletion, stale entities); missing ids and tenants are no-ops."""
        from weaviate.classes.query import Filter

        uuids = [object_id(kind, i) for i in ids]
        coll = self._tenant_coll(tenant, kind) if uuids else None
        if coll is None:
            return
        failed = 0
        for start in range(0, len(uuids), self.batch_size):
            result = coll.data.delete_many(where=Filter.by_id().contains_any(uuids[start : start + self.batch_size]))
            failed += int(getattr(result, "failed", 0) or 0)
        self._changed(tenant, kind)
        if failed:
            raise RuntimeError(f"Weaviate failed to delete {failed} of {len(uuids)} {kind} objects of {tenant!r}")

    def sample_item(self, tenant: str, kind: str) -> tuple[str, list[float]] | None:
        """(id, vector) of one stored item of ``kind``, or None when the tenant has none (see the Redis store's)."""

        def op(coll):
            return coll.query.fetch_objects(limit=1, include_vector=True, return_properties=["item_id"]).objects

        objects = self._read(tenant, kind, op, [])
        if not objects:
            return None
        vector = objects[0].vector
        vector = vector.get(VECTOR_NAME) if isinstance(vector, dict) else vector
        return str((objects[0].properties or {}).get("item_id") or ""), [float(x) for x in vector or []]

    def count(self, tenant: str, kind: str) -> int:
        return self._read(tenant, kind, lambda c: int(c.aggregate.over_all(total_count=True).total_count or 0), 0)

    def drop_tenant(self, tenant: str) -> None:
        """Remove the tenant from every graphfleet collection (its shards and their files go with it)."""
        name = weaviate_tenant(tenant)
        client = self.client()
        names = {n for n in client.collections.list_all(simple=True) if n.startswith(COLLECTION_PREFIX)}
        for coll_name in sorted(names):
            coll = client.collections.get(coll_name)
            if coll.tenants.exists(name):
                coll.tenants.remove([name])
            self._tenants.discard((coll_name, name))
        for kind in (*COLLECTIONS, NAME_VECTORS):
            self._changed(tenant, kind)


def _hit(obj, score: float) -> VectorHit:
    props = obj.properties or {}
    payload = json.loads(props.get("payload_json") or "{}")
    return VectorHit(str(props.get("item_id") or ""), score, payload)
