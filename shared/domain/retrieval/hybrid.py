"""Hybrid search: BM25 fused with vector similarity over a VectorStore collection.

A store with native hybrid search (Weaviate) may expose ``hybrid_search(tenant, kind, text, vector,
top_k, alpha, min_score) -> list[VectorHit]`` (alpha = vector share); it is used when no BM25
index is given. Otherwise the embedded index is queried and fused here.
"""

from __future__ import annotations

from collections.abc import Sequence

from shared.domain.retrieval.bm25 import BM25Index
from shared.domain.retrieval.fusion import fuse


def hybrid_search(
    query_text: str,
    query_vector: Sequence[float] | None,
    vector_store,
    tenant: str,
    kind: str,
    bm25_index: BM25Index | None,
    top_k: int,
    weight: float = 0.5,
    cosine_threshold: float = -1.0,
    method: str = "rrf",
    rrf_k: int = 60,
    key_field: str | None = None,
    oversample: int = 2,
) -> list[tuple[str, float]]:
    """Top ``top_k`` (id, fused score). ``weight`` is the BM25 share (0 = pure vector, 1 = pure BM25).

    ``key_field``: use ``hit.payload[key_field]`` as the id of vector hits (e.g. "name" for entities)
    so they match the BM25 index ids.
    """
    if top_k <= 0:
        return []
    pool = max(top_k * oversample, top_k)
    native = getattr(vector_store, "hybrid_search", None)
    if bm25_index is None and native is not None and query_vector is not None:
        hits = native(tenant, kind, query_text, query_vector, top_k, 1.0 - weight, cosine_threshold)
        return [(_key(h, key_field), float(h.score)) for h in hits][:top_k]
    vec: list[tuple[str, float]] = []
    if query_vector is not None and weight < 1.0 and vector_store is not None:
        hits = vector_store.search(tenant, kind, query_vector, pool, min_score=cosine_threshold)
        vec = [(_key(h, key_field), float(h.score)) for h in hits if h.score >= cosine_threshold]
    kw: list[tuple[str, float]] = []
    if bm25_index is not None and weight > 0.0:
        kw = bm25_index.query(query_text, pool)
    if not kw:
        return vec[:top_k]
    if not vec:
        return kw[:top_k]
    return fuse(kw, vec, weight, method, rrf_k)[:top_k]


def _key(hit, key_field: str | None) -> str:
    if key_field and hit.payload and key_field in hit.payload:
        return str(hit.payload[key_field])
    return hit.id
