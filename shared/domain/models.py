"""Records stored in Redis and passed between pure functions."""

from __future__ import annotations

from pydantic import BaseModel, Field


class Document(BaseModel):
    id: str
    tenant: str
    title: str = ""
    text_hash: str = ""
    metadata: dict[str, str] = Field(default_factory=dict)
    chunk_ids: list[str] = Field(default_factory=list)
    status: str = "pending"  # pending | processing | processed | failed | deleted
    created_at: float = 0.0
    error: str | None = None
    # a paged document (PDF): (page, start, end) of each page's text in the document's text (``documents.page_spans``),
    # so the pages of any span of it (a chunk, a sentence of a chunk) are known without reading the text
    page_spans: list[tuple[int, int, int]] = Field(default_factory=list)


class Chunk(BaseModel):
    id: str
    doc_id: str
    index: int
    text: str
    tokens: int
    pages: list[int] = Field(default_factory=list)  # the pages of a paged document (PDF) the chunk quotes; [] otherwise
    # the chunk's character span in its document's text, recorded when it was cut (None in older data: its pages
    # were then found by searching the document for its text)
    start: int | None = None
    end: int | None = None
    # tokens of the chunk's source row without its citation (``query.row_counts.source_body``) by encoding name, and
    # a CRC-32 of that text and count (``row_counts.row_digest``): counted at ingestion, so a query's context is
    # packed without encoding the chunk again (absent in older data)
    row_tokens: dict[str, int] = Field(default_factory=dict)
    row_digest: int = 0


class EntityFragment(BaseModel):
    """What one chunk said about one entity (one field of the entity's fragment hash)."""

    name: str
    type: str = "unknown"
    description: str = ""
    source_id: str  # chunk id
    doc_id: str = ""


class RelationFragment(BaseModel):
    src: str
    tgt: str
    description: str = ""
    keywords: str = ""
    weight: float = 1.0
    strength: float = 1.0
    source_id: str
    doc_id: str = ""


class ExtractionResult(BaseModel):
    chunk_id: str
    entities: list[EntityFragment] = Field(default_factory=list)
    relations: list[RelationFragment] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)


class Entity(BaseModel):
    # stored by position (``row_codec``), as is Relation: a new field goes last; none is reordered or removed
    name: str
    type: str = "unknown"
    description: str = ""
    source_ids: list[str] = Field(default_factory=list)
    doc_ids: list[str] = Field(default_factory=list)
    degree: int = 0
    summarized: bool = False
    # tokens of ``description`` by encoding name, counted when the entity is written (absent in older data)
    text_tokens: dict[str, int] = Field(default_factory=dict)
    # tokens of the row's cells fixed at merge (``query.context_local.entity_static``: all but the degree) and their
    # digest, as for Chunk (absent in older data)
    row_tokens: dict[str, int] = Field(default_factory=dict)
    row_digest: int = 0
    # digest of what the LLM summary in ``description`` was written from (``merge.summary_digest``; empty when the
    # description is not an LLM summary): a merge of the same fragments reuses it instead of asking again
    summary_of: str = ""
    # digest of the fragments the row was merged from (``merge_fold.fragments_digest``): a later merge that finds
    # them unchanged folds in only the new ones
    merged_of: str = ""
    # the row's only fragment, stored here instead of in a fragment hash of its own: the fragment's stored form
    # without its description, which is the row's (``shared.infra.store.held_fragments``); empty when the row's
    # fragments are in its hash
    sole: str = ""


class Relation(BaseModel):
    src: str
    tgt: str
    description: str = ""
    keywords: str = ""
    weight: float = 1.0
    source_ids: list[str] = Field(default_factory=list)
    doc_ids: list[str] = Field(default_factory=list)
    rank: int = 0
    # tokens of ``description`` by encoding name, as for Entity
    text_tokens: dict[str, int] = Field(default_factory=dict)
    # as for Entity: the row's cells but the weight and the rank (``context_local.relation_static``)
    row_tokens: dict[str, int] = Field(default_factory=dict)
    row_digest: int = 0
    summary_of: str = ""  # as for Entity
    merged_of: str = ""  # as for Entity
    sole: str = ""  # as for Entity


class Community(BaseModel):
    id: str  # "L{level}-{index}" stable within a clustering
    level: int
    nodes: list[str]
    edges: list[tuple[str, str]] = Field(default_factory=list)
    chunk_ids: list[str] = Field(default_factory=list)
    parent: str | None = None
    children: list[str] = Field(default_factory=list)
    occurrence: float = 0.0
    signature: str = ""  # content hash of members + their descriptions: drives incremental reports
    # at least the characters of its members' and links' descriptions (``report_reuse.input_chars``): exact when
    # a clustering read its rows, grown by an upper bound when an incremental clustering kept its report unread
    input_chars_max: int = 0


class Finding(BaseModel):
    summary: str
    explanation: str = ""


class CommunityReport(BaseModel):
    community_id: str
    level: int
    title: str
    summary: str
    rating: float = 0.0
    rating_explanation: str = ""
    findings: list[Finding] = Field(default_factory=list)
    signature: str = ""
    generated_by: str = "llm"  # llm | extractive
    full_text: str = ""
    # what the report was written from (``shared.domain.report_reuse``): a sketch of its community's members and
    # links, and the characters of their descriptions
    basis: str = ""
    basis_chars: int = 0


class UsageRecord(BaseModel):
    tenant: str
    job_id: str = ""
    stage: str
    model: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0
    cache_hit: bool = False
    cost_usd: float = 0.0
    kind: str = "chat"  # chat | embedding
    ts: float = 0.0
    retries: int = 0
    error: str | None = None
    queue: str = ""
    tier: str = ""  # the tenant's tier (metrics label); filled by UsageRecorder when empty


class ChunkFailure(BaseModel):
    chunk_id: str
    stage: str
    cause: str
    attempts: int = 1


class JobCounts(BaseModel):
    documents: int = 0
    chunks_total: int = 0
    chunks_done: int = 0
    chunks_failed: int = 0


class MapPoint(BaseModel):
    description: str
    score: float = Field(0.0)
    community_id: str = ""
