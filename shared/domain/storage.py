"""Narrow storage protocols. Algorithms (chunking, merging, clustering, budgets) live elsewhere."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from shared.domain.models import Chunk, Community, CommunityReport, Document, Entity, Relation

VECTOR_KINDS = ("entities", "chunks")  # the per-tenant vector collections
NAME_VECTORS = "entity_names"  # entity names alone, kept only while synonym edges are on (``retrieval.synonyms``)


@dataclass(frozen=True)
class VectorItem:
    id: str
    vector: Sequence[float]
    payload: dict = field(default_factory=dict)  # small: name/doc_id/text for BM25 and display


@dataclass(frozen=True)
class VectorHit:
    id: str
    score: float  # cosine similarity in [-1, 1]
    payload: dict


class VectorStore(Protocol):
    """Per-tenant vector collections of a kind ("entities", "chunks")."""

    def upsert(self, tenant: str, kind: str, items: Sequence[VectorItem]) -> None: ...

    def search(
        self, tenant: str, kind: str, vector: Sequence[float], top_k: int, min_score: float = -1.0
    ) -> list[VectorHit]: ...

    def delete(self, tenant: str, kind: str, ids: Iterable[str]) -> None: ...

    def count(self, tenant: str, kind: str) -> int: ...

    def drop_tenant(self, tenant: str) -> None: ...

    def sample_item(self, tenant: str, kind: str) -> tuple[str, list[float]] | None: ...  # (id, vector) of one item


class GraphReader(Protocol):
    """Read access to one tenant's graph, as the query engine needs it."""

    tenant: str

    def entities(self, names: Iterable[str]) -> dict[str, Entity]: ...

    def all_entity_names(self) -> list[str]: ...

    def all_entities(self) -> dict[str, Entity]: ...

    def edge_list(self) -> list[tuple[str, str, float]]: ...  # (entity, entity, weight) of every relation

    def relations_of(self, names: Iterable[str], limit: int | None = None) -> list[Relation]: ...

    def relations(self, keys: Iterable[tuple[str, str]]) -> dict[tuple[str, str], Relation]: ...

    def chunks(self, ids: Iterable[str]) -> dict[str, Chunk]: ...

    def all_chunk_ids(self) -> list[str]: ...

    def documents(self, ids: Iterable[str]) -> dict[str, Document]: ...

    def communities(self) -> dict[str, Community]: ...

    def reports(self) -> dict[str, CommunityReport]: ...

    def community_rows(self) -> tuple[dict[str, Community], dict[str, CommunityReport]]: ...  # both, one snapshot

    def entity_communities(self, name: str) -> list[str]: ...

    def entities_communities(self, names: Iterable[str]) -> dict[str, list[str]]: ...

    def communities_by_ids(self, ids: Iterable[str]) -> dict[str, Community]: ...

    def reports_by_ids(self, ids: Iterable[str]) -> dict[str, CommunityReport]: ...
