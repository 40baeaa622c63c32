"""Request and response bodies (with OpenAPI examples)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from shared.domain.query.params import PresetName
from shared.infra.jobs.ingest_submit import MAX_DOCUMENTS
from shared.infra.tenancy.quotas import TenantLimits
from shared.infra.tenancy.tiers import DEFAULT_TIER

DOC_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$"


def _examples(*examples: dict, **config) -> ConfigDict:
    return ConfigDict(json_schema_extra={"examples": list(examples)}, **config)


# ------------------------------------------------------------------ admin
class TenantCreate(BaseModel):
    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [
        {"id": "acme", "name": "Acme Corp", "tier": "gold", "preset": "balanced",
         "limits": {"requests_per_minute": 120, "max_concurrent_jobs": 4, "monthly_token_budget": 5000000}}]})

    id: str | None = Field(None, pattern=r"^[a-z0-9][a-z0-9_-]{0,62}$", description="generated when omitted")
    name: str = Field("", max_length=200)
    tier: str = Field(DEFAULT_TIER, pattern=r"^[a-z0-9_-]{1,32}$")
    preset: PresetName | None = None
    limits: TenantLimits = Field(default_factory=TenantLimits)


class TenantOut(BaseModel):
    model_config = _examples({"id": "acme", "name": "Acme Corp", "tier": "gold", "preset": "balanced",
                              "limits": {"requests_per_minute": 120, "burst": None, "max_concurrent_jobs": 4,
                                         "monthly_token_budget": 5000000}, "created_at": 1717000000.0})

    id: str
    name: str
    tier: str
    preset: str | None
    limits: TenantLimits
    created_at: float


class TenantList(BaseModel):
    items: list[TenantOut]
    total: int


class KeyCreate(BaseModel):
    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [{"name": "ci"}]})

    name: str = Field("", max_length=200)


class KeyOut(BaseModel):
    model_config = _examples({"key_id": "3f2a9c0d1e4b5a69", "tenant": "acme", "name": "ci",
                              "api_key": "gfk_3f2a9c0d1e4b5a69_Vb6...", "created_at": 1717000000.0})

    key_id: str
    tenant: str
    name: str
    api_key: str = Field(description="shown only once; only its hash is stored")
    created_at: float


class KeyRevoked(BaseModel):
    model_config = _examples({"key_id": "3f2a9c0d1e4b5a69", "tenant": "acme", "revoked": True})

    key_id: str
    tenant: str
    revoked: bool


# -------------------------------------------------------------- documents
class DocumentIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    text: str
    id: str | None = Field(None, pattern=DOC_ID_PATTERN)
    title: str = Field("", max_length=1000)
    metadata: dict[str, str] = Field(default_factory=dict, max_length=64)


class IngestBody(BaseModel):
    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [
        {"documents": [{"text": "Marley was dead: to begin with.", "id": "carol-1", "title": "Stave One",
                        "metadata": {"source": "gutenberg"}}]}]})

    documents: list[DocumentIn] = Field(max_length=MAX_DOCUMENTS)
    atomic: bool = Field(False, description="refuse the whole batch when one document is invalid (by default the "
                                            "valid documents are ingested and the job lists each refused one)")


class JobAccepted(BaseModel):
    model_config = _examples({"job_id": "job-5d0c6f0e9d8a4f7c9a8b7c6d5e4f3a2b", "status": "queued",
                              "kind": "ingest", "documents": 1, "new_documents": 1,
                              "location": "/v1/jobs/job-5d0c6f0e9d8a4f7c9a8b7c6d5e4f3a2b"})

    job_id: str
    status: str = "queued"
    kind: str
    documents: int | None = None
    new_documents: int | None = None
    refused: list[dict[str, Any]] | None = Field(None, description="ingestion: the documents not ingested, each "
                                                                   "`{doc_id, name, index, stage, code, cause}`")
    location: str


class DocumentOut(BaseModel):
    model_config = _examples({"id": "carol-1", "title": "Stave One", "status": "processed",
                              "metadata": {"source": "gutenberg"}, "chunks": 3, "created_at": 1717000000.0,
                              "error": None})

    id: str
    title: str
    status: str
    metadata: dict[str, str]
    chunks: int
    created_at: float
    error: str | None = None


class DocumentPage(BaseModel):
    model_config = _examples({"items": [DocumentOut.model_config["json_schema_extra"]["examples"][0]],
                              "total": 1, "offset": 0, "limit": 50})

    items: list[DocumentOut]
    total: int
    offset: int
    limit: int
    status: str | None = None


# ------------------------------------------------------------------- jobs
_JOB_EXAMPLE = {
    "job_id": "job-5d0c6f0e9d8a4f7c9a8b7c6d5e4f3a2b", "kind": "ingest", "status": "running", "stage": "extract",
    "progress": {"documents": 1, "chunks_total": 40, "chunks_done": 12, "chunks_failed": 1, "stage": "extract"},
    "failures": [{"chunk_id": "chunk-ab12", "stage": "extract", "cause": "LLM timeout", "attempts": 3}],
    "usage": {"calls": 25, "prompt_tokens": 41000, "completion_tokens": 9000, "cost_usd": 0.0115, "by_stage": {}},
    "timestamps": {"created_at": 1717000000.0, "started_at": 1717000000.4, "updated_at": 1717000012.0,
                   "finished_at": None},
    "stage_times": {"chunk": 0.4, "extract": 0.9}, "error": None, "result": None}


class JobOut(BaseModel):
    model_config = _examples(_JOB_EXAMPLE)

    job_id: str
    kind: str
    status: str
    stage: str | None = None
    progress: dict[str, Any]
    failures: list[dict[str, Any]]
    usage: dict[str, Any]
    timestamps: dict[str, float | None]
    stage_times: dict[str, float] = {}
    error: str | None = None
    result: Any = None
    waiting: dict[str, Any] | None = Field(
        default=None, description="while the job waits for an unreachable LLM endpoint: message 'waiting for the LLM',"
        " since, gives_up_at (epoch seconds), last_error; null otherwise")


class JobListOut(BaseModel):
    model_config = _examples({"items": [_JOB_EXAMPLE], "total": 1, "offset": 0, "limit": 50})

    items: list[JobOut] = Field(description="newest first")
    total: int = Field(description="jobs that match the filters (all the tenant's jobs on record without filters)")
    offset: int
    limit: int


class CancelOut(BaseModel):
    model_config = _examples({"job_id": "job-5d0c6f0e9d8a4f7c9a8b7c6d5e4f3a2b", "canceled": True,
                              "status": "canceled", "message": "canceled; finished chunks are kept",
                              "progress": _JOB_EXAMPLE["progress"], "usage": _JOB_EXAMPLE["usage"]})

    job_id: str
    canceled: bool
    status: str
    message: str
    progress: dict[str, Any]
    usage: dict[str, Any]


# ---------------------------------------------------------------- queries
class QueryAccepted(BaseModel):
    model_config = _examples({"query_id": "qry-0f1e2d3c4b5a69788796a5b4c3d2e1f0", "status": "queued",
                              "location": "/v1/queries/qry-0f1e2d3c4b5a69788796a5b4c3d2e1f0"})

    query_id: str
    status: str
    location: str


class QueryOut(BaseModel):
    """Status, and once finished every field of the worker's result (answer, budget, usage, sources...)."""

    model_config = ConfigDict(extra="allow", json_schema_extra={"examples": [
        {"query_id": "qry-0f1e2d3c4b5a69788796a5b4c3d2e1f0", "status": "succeeded", "error": None,
         "answer": "- Scrooge becomes generous ...", "answer_kind": "llm", "partial": False,
         "budget": {"total_tokens": 5200, "total_allowed": 6000, "model_limit": 128000, "sections": []},
         "total_usage": {"calls": 2, "prompt_tokens": 6100, "completion_tokens": 400, "cost_usd": 0.0012},
         "sources": []}]})

    query_id: str
    status: str
    error: str | None = None


# ------------------------------------------------------------ usage/graph
class UsageOut(BaseModel):
    model_config = _examples({"tenant": "acme", "from": 1717000000.0, "to": 1717086399.999, "group_by": "stage",
                              "totals": {"calls": 3, "prompt_tokens": 900, "completion_tokens": 120,
                                         "total_tokens": 1020, "cost_usd": 0.000207, "cache_hits": 1, "errors": 0},
                              "groups": [{"key": "extract", "calls": 3, "prompt_tokens": 900,
                                          "completion_tokens": 120, "total_tokens": 1020, "cost_usd": 0.000207,
                                          "cache_hits": 1, "errors": 0}]}, populate_by_name=True)

    tenant: str
    from_: float | None = Field(None, alias="from", serialization_alias="from")
    to: float | None = None
    group_by: str | None = None
    totals: dict[str, Any]
    groups: list[dict[str, Any]] | None = None


class StatsOut(BaseModel):
    model_config = _examples({"documents": 1, "chunks": 41, "entities": 312, "relations": 540,
                              "communities_by_level": {"0": 12, "1": 30}, "reports": 42})

    documents: int
    chunks: int
    entities: int
    relations: int
    communities_by_level: dict[str, int]
    reports: int


class SourceDocumentOut(BaseModel):
    """A document an entity was extracted from."""

    id: str
    name: str = Field(description="the uploaded file's name, else the document's title, else its id")
    pages: list[int] = Field(default_factory=list, description="pages the passages quote; [] for unpaged text")
    chunks: int = Field(description="how many of the entity's passages come from this document")


class EntityOut(BaseModel):
    model_config = _examples({"name": "SCROOGE", "type": "person", "description": "A miser<SEP>Marley's partner",
                              "descriptions": ["A miser", "Marley's partner"],
                              "degree": 42, "sources": {"chunks": ["chunk-ab12"], "documents": ["carol-1"]},
                              "source_documents": [{"id": "carol-1", "name": "carol.pdf", "pages": [3, 4],
                                                    "chunks": 1}],
                              "neighbors": [{"name": "MARLEY", "description": "former partner",
                                             "descriptions": ["former partner"], "keywords": "business",
                                             "weight": 3.0}],
                              "communities": ["L0-1", "L1-4"]})

    name: str
    type: str
    description: str
    descriptions: list[str] = []
    degree: int
    sources: dict[str, list[str]]
    source_documents: list[SourceDocumentOut] = []
    neighbors: list[dict[str, Any]]
    communities: list[str]


class EntityHit(BaseModel):
    name: str
    type: str
    degree: int


class EntitySearchOut(BaseModel):
    model_config = _examples({"q": "scro", "total": 1, "items": [{"name": "SCROOGE", "type": "person", "degree": 42}]})

    q: str
    total: int = Field(description="matching entities (items holds at most `limit`: prefix matches, then by degree)")
    items: list[EntityHit]


class CommunityReportOut(BaseModel):
    title: str
    summary: str
    rating: float
    rating_explanation: str
    findings: list[dict[str, str]]
    generated_by: str


class CommunitySummary(BaseModel):
    id: str
    level: int
    size: int = Field(description="member entities")
    parent: str | None
    title: str | None = Field(description="the report's title (null while no report exists)")
    rating: float | None


class CommunityListOut(BaseModel):
    model_config = _examples({"level": 0, "levels": {"0": 12, "1": 30}, "total": 1, "items": [
        {"id": "L0-1", "level": 0, "size": 14, "parent": None, "title": "Scrooge and Marley", "rating": 7.5}]})

    level: int
    levels: dict[str, int] = Field(description="communities per level")
    total: int
    items: list[CommunitySummary]


class CommunityOut(BaseModel):
    model_config = _examples({"id": "L0-1", "level": 0, "parent": None, "children": ["L1-3"],
                              "nodes": ["SCROOGE", "MARLEY"], "report": {
                                  "title": "Scrooge and Marley", "summary": "...", "rating": 7.5,
                                  "rating_explanation": "", "findings": [{"summary": "...", "explanation": "..."}],
                                  "generated_by": "llm"}})

    id: str
    level: int
    parent: str | None
    children: list[str]
    nodes: list[str]
    report: CommunityReportOut | None


class ReadyOut(BaseModel):
    model_config = _examples({"ready": True, "redis": True, "broker": True,
                              "queues": {"chunker": True, "extractor": True}})

    ready: bool
    redis: bool  # the state Redis (or Redis Cluster) answers
    broker: bool = True  # Celery's broker answers (the state Redis itself unless GRAPHFLEET_BROKER_URL is set)
    queues: dict[str, bool]
