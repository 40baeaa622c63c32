"""``/v1/documents``: ingest (JSON or upload), list, get, delete."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Path, Query
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse

from api_gateway.deps import GatewayDep, Principal, TenantDep
from api_gateway.errors import not_found
from api_gateway.ingest_input import REQUEST_BODY_DOC, BatchDep
from api_gateway.routes.common import RETRY_AFTER_S, IdempotencyKey, errors
from api_gateway.schemas import DocumentOut, DocumentPage, JobAccepted
from api_gateway.state import Gateway
from api_gateway.submission import run_submission
from shared.domain.models import Document
from shared.infra.jobs.ingest_submit import submit_deletion, submit_ingestion
from shared.infra.store.redis_graph import GraphStore
from shared.public_json import accepted_json, document_json

router = APIRouter(prefix="/v1/documents", tags=["documents"])
DocId = Annotated[str, Path(min_length=1, max_length=200, examples=["carol-1"])]


def accepted(status: int, body: dict) -> JSONResponse:
    retry_after = str(RETRY_AFTER_S.get(body.get("kind", ""), 2))
    return JSONResponse(body, status_code=status, headers={"Location": body["location"], "Retry-After": retry_after})


@router.post("", status_code=202, response_model=JobAccepted, openapi_extra=REQUEST_BODY_DOC,
             responses=errors(400, 401, 413, 415, 422, 429), summary="Ingest a batch of documents")
async def ingest_documents(gw: GatewayDep, who: TenantDep, batch: BatchDep,
                           idempotency_key: IdempotencyKey = None) -> JSONResponse:
    """Validate synchronously, store (deduplicated by content hash), enqueue; poll the returned job. Invalid
    documents are refused and listed (``refused``, and the job's ``failures``); ``atomic`` refuses the batch."""

    def submit() -> dict:  # ``batch`` was validated when it was read (BatchDep): submitting does not validate again
        out = submit_ingestion(gw.redis, gw.celery, who.tenant, batch.items, gw.settings, atomic=batch.atomic)
        return accepted_json(out["job_id"], "ingest", documents=out["documents"],
                             new_documents=out["new_documents"], refused=out["refused"])

    status, body = await run_in_threadpool(run_submission, gw, who, scope="documents",
                                           idempotency_key=idempotency_key, fingerprint=batch.fingerprint,
                                           submit=submit)
    return accepted(status, body)


def _out(doc: Document) -> DocumentOut:
    return DocumentOut(**document_json(doc))


DocStatus = Literal["pending", "processing", "processed", "failed"]
SCAN_PAGE = 500


@router.get("", response_model=DocumentPage, responses=errors(401, 422, 429), summary="List documents")
def list_documents(gw: GatewayDep, who: TenantDep, offset: Annotated[int, Query(ge=0, le=2**31 - 1)] = 0,
                   limit: Annotated[int, Query(ge=1, le=500)] = 50,
                   status: Annotated[DocStatus | None, Query(description="only documents in this status")] = None,
                   ) -> DocumentPage:
    """Oldest first. With ``status``, ``total`` counts the matching documents and the page is taken from them."""
    store = GraphStore(gw.redis, who.tenant)
    if status is None:
        ids = store.list_document_ids(offset, limit)
        docs = store.documents(ids)
        return DocumentPage(items=[_out(docs[i]) for i in ids if i in docs], total=store.document_count(),
                            offset=offset, limit=limit, status=None)
    matching = [doc for doc in _all_documents(store) if doc.status == status]
    return DocumentPage(items=[_out(d) for d in matching[offset:offset + limit]], total=len(matching),
                        offset=offset, limit=limit, status=status)


def _all_documents(store: GraphStore):
    start = 0
    while ids := store.list_document_ids(start, SCAN_PAGE):
        docs = store.documents(ids)
        yield from (docs[i] for i in ids if i in docs)
        start += SCAN_PAGE


def _document(gw: Gateway, who: Principal, doc_id: str) -> Document:
    doc = GraphStore(gw.redis, who.tenant).document(doc_id)
    if doc is None or doc.status == "deleted":
        raise not_found("document")
    return doc


@router.get("/{doc_id}", response_model=DocumentOut, responses=errors(401, 404, 429), summary="One document")
def get_document(gw: GatewayDep, who: TenantDep, doc_id: DocId) -> DocumentOut:
    return _out(_document(gw, who, doc_id))


@router.delete("/{doc_id}", status_code=202, response_model=JobAccepted, responses=errors(400, 401, 404, 409, 422, 429),
               summary="Delete a document and what it contributed to the graph")
def delete_document(gw: GatewayDep, who: TenantDep, doc_id: DocId,
                    idempotency_key: IdempotencyKey = None) -> JSONResponse:
    _document(gw, who, doc_id)

    def submit() -> dict:
        return accepted_json(submit_deletion(gw.redis, gw.celery, who.tenant, doc_id), "delete", documents=1)

    status, body = run_submission(gw, who, scope="delete", idempotency_key=idempotency_key,
                                  fingerprint=doc_id, submit=submit, uses_llm=False)
    return accepted(status, body)
