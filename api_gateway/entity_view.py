"""The readable parts of one entity for ``GET /v1/graph/entities/{name}``, beside the stored fields: its merged
description split into distinct parts, and the documents it was extracted from by name, with the pages (of a
paged document such as a PDF) its passages quote."""

from __future__ import annotations

from api_gateway.schemas import SourceDocumentOut
from shared.domain.merge import split_description
from shared.domain.models import Entity
from shared.infra.store.redis_graph import GraphStore


def description_parts(description: str) -> list[str]:
    """The distinct, non-empty parts of a description merged from several passages (joined with ``<SEP>``),
    in stored order."""
    return list(dict.fromkeys(split_description(description)))


def document_name(doc_id: str, metadata: dict[str, str], title: str) -> str:
    return metadata.get("filename") or title or doc_id


def source_documents(store: GraphStore, entity: Entity) -> list[SourceDocumentOut]:
    """One row per source document, in the entity's order; a document deleted since keeps its id as name. A passage
    counts for the document that first stored it (a passage shared by identical documents is stored once)."""
    chunks = store.chunks(entity.source_ids).values()
    doc_ids = list(dict.fromkeys([*entity.doc_ids, *(c.doc_id for c in chunks if c.doc_id)]))
    docs = store.documents(doc_ids)
    pages: dict[str, set[int]] = {d: set() for d in doc_ids}
    counts = dict.fromkeys(doc_ids, 0)
    for chunk in chunks:
        if chunk.doc_id in counts:
            counts[chunk.doc_id] += 1
            pages[chunk.doc_id].update(chunk.pages)
    rows = []
    for doc_id in doc_ids:
        doc = docs.get(doc_id)
        name = document_name(doc_id, doc.metadata, doc.title) if doc else doc_id
        rows.append(SourceDocumentOut(id=doc_id, name=name, pages=sorted(pages[doc_id]), chunks=counts[doc_id]))
    return rows
