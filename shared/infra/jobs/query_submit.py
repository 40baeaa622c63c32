"""Enqueue a query job (gateway and CLI) and read its result."""

from __future__ import annotations

from shared.domain.ids import validate_tenant
from shared.domain.query.params import QueryParam
from shared.infra.jobs.store import JobStore
from shared.infra.messaging.messages import RunQuery, send
from shared.infra.store.redis_graph import GraphStore

NO_DOCUMENTS = "no documents ingested for this tenant: ingest some first (POST /v1/documents, graphfleet ingest)"


QUERY_ID_PREFIX = "qry-"


def new_query_id() -> str:
    import uuid

    return QUERY_ID_PREFIX + uuid.uuid4().hex


def is_query_id(job_id: str) -> bool:
    """A query's id, told from an ingestion's (``job-``) without reading its record."""
    return job_id.startswith(QUERY_ID_PREFIX)


def has_documents(redis, tenant: str) -> bool:
    """Whether a query has anything to answer from: without documents it is refused before any LLM call."""
    return GraphStore(redis, tenant).document_count() > 0


def submit_query(redis, celery, tenant: str, param: QueryParam) -> str:
    validate_tenant(tenant)
    query_id = new_query_id()
    JobStore(redis, tenant).create(query_id, "query", params=param.model_dump(mode="json", exclude_unset=True))
    send(celery, RunQuery(tenant, query_id))
    return query_id
