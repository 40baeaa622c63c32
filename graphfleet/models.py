"""Typed results: pydantic models mirroring the gateway's response bodies (``api_gateway/schemas.py``).

They accept fields a newer gateway adds (``extra="allow"``), so an older client keeps working.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

TERMINAL = frozenset({"succeeded", "failed", "canceled"})


class _Model(BaseModel):
    model_config = ConfigDict(extra="allow", populate_by_name=True)


class Tenant(_Model):
    id: str
    name: str = ""
    tier: str = ""
    preset: str | None = None
    limits: dict[str, Any] = Field(default_factory=dict)
    created_at: float | None = None


class ApiKey(_Model):
    key_id: str
    tenant: str
    name: str = ""
    api_key: str | None = Field(None, description="only in the creation response")
    created_at: float | None = None


class KeyRevoked(_Model):
    key_id: str
    tenant: str
    revoked: bool


class JobAccepted(_Model):
    job_id: str
    status: str = "queued"
    kind: str = ""
    documents: int | None = None
    new_documents: int | None = None
    refused: list[dict[str, Any]] | None = None  # ingestion: documents not ingested, each with its ``cause``
    location: str = ""


class Job(_Model):
    job_id: str
    kind: str = ""
    status: str
    stage: str | None = None
    progress: dict[str, Any] = Field(default_factory=dict)
    failures: list[dict[str, Any]] = Field(default_factory=list)
    usage: dict[str, Any] = Field(default_factory=dict)
    timestamps: dict[str, float | None] = Field(default_factory=dict)
    stage_times: dict[str, float] = Field(default_factory=dict)
    error: str | None = None
    result: Any = None

    @property
    def finished(self) -> bool:
        return self.status in TERMINAL


class JobPage(_Model):
    items: list[Job]
    total: int | None = None
    offset: int = 0
    limit: int | None = None


class CancelResult(_Model):
    job_id: str
    canceled: bool
    status: str
    message: str = ""
    progress: dict[str, Any] = Field(default_factory=dict)
    usage: dict[str, Any] = Field(default_factory=dict)


class Document(_Model):
    id: str
    title: str = ""
    status: str
    metadata: dict[str, str] = Field(default_factory=dict)
    chunks: int = 0
    created_at: float | None = None
    error: str | None = None


class DocumentPage(_Model):
    items: list[Document]
    total: int
    offset: int
    limit: int
    status: str | None = None


class QueryAccepted(_Model):
    query_id: str
    status: str
    location: str = ""


class QueryResult(_Model):
    """Status and, once finished, every field of the worker's result (``answer``, ``answer_kind``, ``budget``,
    ``total_usage``, ``sources``, ``partial``, ...; read the others with ``model_extra`` or ``model_dump()``)."""

    query_id: str
    status: str
    error: str | None = None
    answer: str | None = None
    answer_kind: str | None = None
    partial: bool = False
    budget: dict[str, Any] | None = None
    total_usage: dict[str, Any] | None = None
    sources: Any = None

    @property
    def finished(self) -> bool:
        return self.status in TERMINAL


class Usage(_Model):
    tenant: str
    from_: float | None = Field(None, alias="from")
    to: float | None = None
    group_by: str | None = None
    totals: dict[str, Any] = Field(default_factory=dict)
    groups: list[dict[str, Any]] | None = None


class GraphStats(_Model):
    documents: int
    chunks: int
    entities: int
    relations: int
    communities_by_level: dict[str, int] = Field(default_factory=dict)
    reports: int = 0


class Entity(_Model):
    name: str
    type: str = ""
    description: str = ""
    degree: int = 0
    sources: dict[str, list[str]] = Field(default_factory=dict)
    neighbors: list[dict[str, Any]] = Field(default_factory=list)
    communities: list[str] = Field(default_factory=list)


@dataclass(frozen=True)
class Event:
    """One server-sent event of a query stream: ``accepted``, ``status``, ``map``, ``token`` or ``result``."""

    event: str
    data: dict[str, Any] = field(default_factory=dict)
