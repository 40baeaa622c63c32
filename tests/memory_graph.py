"""In-memory GraphReader and VectorStore (numpy cosine) plus a deterministic hashing embedder.

For tests and offline demos of the pure query core; production code uses the Redis adapters.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

from shared.domain.models import Chunk, Community, CommunityReport, Document, Entity, Relation
from shared.domain.retrieval.bm25 import tokenize
from shared.domain.storage import VectorHit, VectorItem


@dataclass
class InMemoryGraphReader:
    tenant: str = "t1"
    entity_map: dict[str, Entity] = field(default_factory=dict)
    relation_map: dict[tuple[str, str], Relation] = field(default_factory=dict)
    chunk_map: dict[str, Chunk] = field(default_factory=dict)
    document_map: dict[str, Document] = field(default_factory=dict)
    community_map: dict[str, Community] = field(default_factory=dict)
    report_map: dict[str, CommunityReport] = field(default_factory=dict)

    def entities(self, names: Iterable[str]) -> dict[str, Entity]:
        return {n: self.entity_map[n] for n in names if n in self.entity_map}

    def all_entity_names(self) -> list[str]:
        return list(self.entity_map)

    def all_entities(self) -> dict[str, Entity]:
        return dict(self.entity_map)

    def edge_list(self) -> list[tuple[str, str, float]]:
        return [(s, t, r.weight) for (s, t), r in self.relation_map.items()]

    def relations_of(self, names: Iterable[str], limit: int | None = None) -> list[Relation]:
        wanted = set(names)
        found = [r for (s, t), r in self.relation_map.items() if s in wanted or t in wanted]
        return found if limit is None else sorted(found, key=lambda r: -r.weight)[:limit]

    def relations(self, keys: Iterable[tuple[str, str]]) -> dict[tuple[str, str], Relation]:
        return {k: self.relation_map[k] for k in keys if k in self.relation_map}

    def chunks(self, ids: Iterable[str]) -> dict[str, Chunk]:
        return {i: self.chunk_map[i] for i in ids if i in self.chunk_map}

    def all_chunk_ids(self) -> list[str]:
        return list(self.chunk_map)

    def documents(self, ids: Iterable[str]) -> dict[str, Document]:
        return {i: self.document_map[i] for i in ids if i in self.document_map}

    def communities(self) -> dict[str, Community]:
        return dict(self.community_map)

    def reports(self) -> dict[str, CommunityReport]:
        return dict(self.report_map)

    def community_rows(self) -> tuple[dict[str, Community], dict[str, CommunityReport]]:
        return self.communities(), self.reports()

    def entity_communities(self, name: str) -> list[str]:
        return [c.id for c in self.community_map.values() if name in c.nodes]

    def entities_communities(self, names: Iterable[str]) -> dict[str, list[str]]:
        return {n: self.entity_communities(n) for n in names}

    def communities_by_ids(self, ids: Iterable[str]) -> dict[str, Community]:
        return {i: self.community_map[i] for i in ids if i in self.community_map}

    def reports_by_ids(self, ids: Iterable[str]) -> dict[str, CommunityReport]:
        return {i: self.report_map[i] for i in ids if i in self.report_map}


def hash_embed(texts: Sequence[str], dim: int = 64) -> list[list[float]]:
    """Bag-of-hashed-words vectors: similar wording -> similar vectors. Deterministic, no model."""
    out = []
    for text in texts:
        v = np.zeros(dim, dtype=np.float32)
        for tok in tokenize(text):
            h = int.from_bytes(hashlib.blake2b(tok.encode(), digest_size=4).digest(), "little")
            v[h % dim] += 1.0 if (h >> 31) & 1 else -1.0
        n = float(np.linalg.norm(v))
        out.append((v / n if n else v).tolist())
    return out


@dataclass
class InMemoryVectorStore:
    data: dict[tuple[str, str], dict[str, VectorItem]] = field(default_factory=dict)

    def upsert(self, tenant: str, kind: str, items: Sequence[VectorItem]) -> None:
        bucket = self.data.setdefault((tenant, kind), {})
        for it in items:
            bucket[it.id] = it

    def search(self, tenant: str, kind: str, vector: Sequence[float], top_k: int, min_score: float = -1.0
               ) -> list[VectorHit]:
        items = list(self.data.get((tenant, kind), {}).values())
        if not items or top_k <= 0:
            return []
        m = np.asarray([it.vector for it in items], dtype=np.float32)
        q = np.asarray(vector, dtype=np.float32)
        denom = np.linalg.norm(m, axis=1) * (np.linalg.norm(q) or 1.0)
        sims = (m @ q) / np.where(denom == 0, 1.0, denom)
        order = np.argsort(-sims, kind="stable")[:top_k]
        return [VectorHit(items[i].id, float(sims[i]), dict(items[i].payload)) for i in order
                if sims[i] >= min_score]

    def delete(self, tenant: str, kind: str, ids: Iterable[str]) -> None:
        bucket = self.data.get((tenant, kind), {})
        for i in ids:
            bucket.pop(i, None)

    def count(self, tenant: str, kind: str) -> int:
        return len(self.data.get((tenant, kind), {}))

    def drop_tenant(self, tenant: str) -> None:
        for key in [k for k in self.data if k[0] == tenant]:
            del self.data[key]

    def sample_item(self, tenant: str, kind: str) -> tuple[str, list[float]] | None:
        bucket = self.data.get((tenant, kind), {})
        first = min(bucket, default=None)
        return None if first is None else (first, list(bucket[first].vector))
