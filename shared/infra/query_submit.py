"""Enqueue a query job (gateway and CLI) and read its result."""

from __future__ import annotations

from shared.domain.ids import validate_tenant
from shared.domain.query.params import QueryParam
from shared.infra.jobs import JobStore
from shared.infra.messages import RunQuery, send


def new_query_id() -> str:
    import uuid

    return "qry-" + uuid.uuid4().hex


def submit_query(redis, celery, tenant: str, param: QueryParam) -> str:
    validate_tenant(tenant)
    query_id = new_query_id()
    JobStore(redis, tenant).create(query_id, "query", params=param.model_dump(mode="json", exclude_unset=True))
    send(celery, RunQuery(tenant, query_id))
    return query_id
