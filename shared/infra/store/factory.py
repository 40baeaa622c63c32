"""Vector store factory with lazy imports of optional backends.

``settings.vector_backend``: ``redis`` (default, the embedded store) or ``weaviate``
(``GRAPHFLEET_VECTOR_BACKEND=weaviate`` with ``GRAPHFLEET_WEAVIATE_URL``, ``GRAPHFLEET_WEAVIATE_GRPC_PORT``
and optionally ``GRAPHFLEET_WEAVIATE_API_KEY``). Building a store opens no connection: the Weaviate client
is created on first use in the process that uses it (workers build their runtime after fork).
"""

from __future__ import annotations


def make_vector_store(settings, redis):
    if settings.vector_backend == "weaviate":
        from shared.infra.store.weaviate_store import WeaviateVectorStore

        # redis: writes bump the per-tenant version counters that the BM25 caches key on
        return WeaviateVectorStore.from_settings(settings, redis=redis)
    from shared.infra.store.redis_vectors import RedisVectorStore

    # the row-id snapshots share the query indexes' size limit (0: none stored or read)
    return RedisVectorStore(redis, snapshot_bytes=settings.query.index_snapshot_mb * 2**20)
