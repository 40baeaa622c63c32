"""``/v1/queries``: submit (optionally wait up to 60 s, or stream its events), fetch the result."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Body
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse, Response
from pydantic import Field

from api_gateway.deps import GatewayDep, TenantDep
from api_gateway.errors import ApiError
from api_gateway.idempotency import fingerprint
from api_gateway.query_view import QueryId, query_out, query_view
from api_gateway.routes.common import RETRY_AFTER_S, IdempotencyKey, WaitSeconds, errors, wait_until_finished
from api_gateway.routes.query_events import sse, stream_response
from api_gateway.schemas import QueryAccepted, QueryOut
from api_gateway.submission import run_submission
from shared.domain.query.params import QueryParam
from shared.infra.jobs.query_submit import NO_DOCUMENTS, has_documents, submit_query
from shared.infra.jobs.store import TERMINAL

router = APIRouter(prefix="/v1/queries", tags=["queries"])
QUERY_EXAMPLES = {
    "local": {"summary": "local search with a token budget",
              "value": {"mode": "local", "query": "How does Scrooge change after the ghosts visit?",
                        "response_type": "bullet_points", "max_total_tokens": 6000}},
    "global": {"summary": "global search over community reports",
               "value": {"mode": "global", "query": "What are the main themes?", "level": 1}},
    "context": {"summary": "only the retrieved context", "value": {"mode": "hybrid", "query": "Who is Marley?",
                                                                     "only_need_context": True}},
}


class QueryRequest(QueryParam):
    """A query's parameters, and how to answer the submission."""

    stream: bool = Field(False, description="answer `200 text/event-stream`: `accepted` then the events of "
                                            "`GET /v1/queries/{query_id}/events` (tokens as they are produced)")


@router.post("", status_code=202, response_model=QueryAccepted, summary="Submit a query",
             responses={200: {"model": QueryOut, "description": "finished within `?wait`; with `\"stream\": true`, the "
                          "events: `accepted` `{query_id, location}`, then those of `GET .../events`",
                     "content": {"text/event-stream": {"schema": {"type": "string"}}}},
                        **errors(400, 401, 404, 413, 422, 429)})
async def create_query(
    gw: GatewayDep, who: TenantDep,
    request: Annotated[QueryRequest, Body(openapi_examples=QUERY_EXAMPLES)],
    wait: WaitSeconds = 0,
    idempotency_key: IdempotencyKey = None,
) -> Response:
    if not request.query.strip():
        raise ApiError(422, "empty_query", "query text is empty")
    fields = request.model_dump(mode="json", exclude_unset=True, exclude={"stream"})  # preset: in the worker
    param = QueryParam.model_validate(fields)

    def submit() -> dict:
        query_id = submit_query(gw.redis, gw.celery, who.tenant, param)
        return {"job_id": query_id, "query_id": query_id, "status": "queued", "location": f"/v1/queries/{query_id}"}

    def checked() -> tuple[int, dict]:  # a tenant with no documents is refused as the CLI refuses it: no job
        if not has_documents(gw.redis, who.tenant):
            raise ApiError(404, "no_documents", NO_DOCUMENTS)
        return run_submission(gw, who, scope="queries", idempotency_key=idempotency_key,
                              fingerprint=fingerprint(fields), submit=submit)

    status, body = await run_in_threadpool(checked)
    body = {k: v for k, v in body.items() if k != "job_id"}
    if request.stream:

        accepted = sse("accepted", {"query_id": body["query_id"], "location": body["location"]})
        return stream_response(gw, who.tenant, body["query_id"], accepted, {"Location": body["location"]})
    if wait > 0 and await wait_until_finished(gw, who.tenant, body["query_id"], wait):
        view = await run_in_threadpool(query_view, gw, who.tenant, body["query_id"])
        return JSONResponse(query_out(view), status_code=200, headers={"Location": body["location"]})
    return JSONResponse(body, status_code=status, headers={"Location": body["location"],
                                                            "Retry-After": str(RETRY_AFTER_S["query"])})


@router.get("/{query_id}", response_model=QueryOut, responses=errors(401, 404, 429), summary="Query status/result")
def get_query(gw: GatewayDep, who: TenantDep, query_id: QueryId) -> JSONResponse:
    """The result (answer, answer_kind, budget, usage, sources, partial, ...) once finished; otherwise the
    status with ``Retry-After``."""
    view = query_view(gw, who.tenant, query_id)
    headers = {} if view["status"] in TERMINAL else {"Retry-After": str(RETRY_AFTER_S["query"])}
    return JSONResponse(query_out(view), headers=headers)
