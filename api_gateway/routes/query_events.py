"""``GET /v1/queries/{id}/events``: a query followed as Server-Sent Events (also the answer of
``POST /v1/queries`` with ``"stream": true``).

Events, in order: ``status`` ``{"status", "stage"}`` on each change (the first is the current one), ``map``
``{"done", "total"}`` during a global query's map phase, ``token`` ``{"text"}`` for each answer token as the
LLM produces it, and last ``result``: exactly the body of ``GET /v1/queries/{id}``; then the stream closes.
Workers log and publish ``map``/``token`` on the query's channel (``shared.infra.jobs.query_state``); the stream
subscribes before it reads the job's stored status, which stays the source of truth (re-read every ``POLL_S``),
and the log of what was published before (a stream that starts mid-answer gets every token), so nothing is
missed between the two. A query no worker will pick up (still ``queued``, no live consumer of the
query queue) ends the stream after its status instead of holding it open: reconnect or poll.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator

from fastapi import APIRouter
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import StreamingResponse

from api_gateway.deps import GatewayDep, TenantDep
from api_gateway.query_view import QueryId, query_out, query_view
from api_gateway.routes.common import errors
from api_gateway.state import Gateway
from shared.infra.jobs.query_state import QueryEvents
from shared.infra.jobs.store import TERMINAL
from shared.infra.messaging.messages import RunQuery
from shared.infra.messaging.queueing import ROUTES

router = APIRouter(prefix="/v1/queries", tags=["queries"])
POLL_S = 0.25  # the stored status is re-read at least this often
KEEPALIVE_S = 15.0  # an SSE comment after this much silence keeps proxies from closing the connection
EVENT_STAGE = {"token": "answer", "map": "map"}  # the stage a published event shows the query was in
SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
SSE_EXAMPLE = ('event: status\ndata: {"status": "running", "stage": "retrieve"}\n\n'
               'event: token\ndata: {"text": "Bob Cratchit is "}\n\n'
               'event: result\ndata: {"query_id": "qry-...", "status": "succeeded", "answer": "..."}\n\n')
STREAM_DOC = {"text/event-stream": {"schema": {"type": "string"}, "example": SSE_EXAMPLE}}


def sse(event: str, data: dict) -> str:
    return f"event: {event}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n"


class _Follow:
    """One stream's loop: the stored state first, then the published events, until the result.

    The order is kept by construction: every ``token``/``map`` event of a query is in its event log before the
    worker stores a final status (the answer's tokens are flushed before the result is saved), so on reading a
    final status the stream first passes on what is left of the log, then that status, then the ``result``.
    A ``token`` or ``map`` event is preceded by a ``status running`` (re-read from the job, or the event's own
    stage when the job has moved on), never by ``queued``."""

    def __init__(self, gw: Gateway, tenant: str, query_id: str, replay: bool = False):
        self.gw, self.tenant, self.query_id, self.replay = gw, tenant, query_id, replay
        self.feed = QueryEvents(gw.aredis(), tenant, query_id)
        self.last: tuple | None = None
        self.finished = False  # the result was sent (or nothing more will come)

    async def events(self) -> AsyncIterator[str]:
        await self.feed.subscribe()
        try:
            first, quiet = True, time.monotonic()
            while True:
                async for chunk in self._state(first):
                    yield chunk
                    quiet = time.monotonic()
                if self.finished:
                    return
                first = False
                async for chunk in self._published():
                    yield chunk
                    quiet = time.monotonic()
                if time.monotonic() - quiet >= KEEPALIVE_S:
                    yield ": keepalive\n\n"
                    quiet = time.monotonic()
        finally:
            await self.feed.close()

    def _status(self, status: str | None, stage: str | None) -> str | None:
        if (status, stage) == self.last:
            return None
        self.last = (status, stage)
        return sse("status", {"status": status, "stage": stage})

    async def _state(self, first: bool) -> AsyncIterator[str]:
        status, stage = await self.feed.state()
        if status in TERMINAL:
            async for chunk in self._final(first, status, stage):
                yield chunk
            return
        if (chunk := self._status(status, stage)) is not None:
            yield chunk
        if first:  # what was published before this stream subscribed
            for event, data in await self.feed.logged():
                async for chunk in self._event(event, data):
                    yield chunk
        if status is None:  # the query expired meanwhile
            self.finished = True
        elif status == "queued" and not await self.feed.consumed(ROUTES.get(RunQuery.TASK, "query")):
            self.finished = True  # nobody will run it: do not hold the connection open

    async def _final(self, first: bool, status: str, stage: str | None) -> AsyncIterator[str]:
        """The rest of the log (complete once the status is final), the final status, the result."""
        if self.replay or not first:
            rest = await (self.feed.logged() if first else self.feed.unread())
            for event, data in rest:
                async for chunk in self._event(event, data):
                    yield chunk
        if (chunk := self._status(status, stage)) is not None:
            yield chunk
        view = await run_in_threadpool(query_view, self.gw, self.tenant, self.query_id)
        yield sse("result", query_out(view))
        self.finished = True

    async def _event(self, event: str, data: dict) -> AsyncIterator[str]:
        """A published event, after a ``status running`` when the last status sent was not running."""
        if self.last is None or self.last[0] != "running":
            status, stage = await self.feed.state()
            if status != "running":  # the job has moved on (or not yet been seen running): the event's own stage
                status, stage = "running", EVENT_STAGE.get(event, stage)
            if (chunk := self._status(status, stage)) is not None:
                yield chunk
        yield sse(event, data)

    async def _published(self) -> AsyncIterator[str]:
        message = await self.feed.next(POLL_S)
        while message is not None:
            event, data = message
            if event == "end":
                return  # the query ended: its final state is read next
            if event != "seen":
                async for chunk in self._event(event, data):
                    yield chunk
            message = await self.feed.next(0)


def stream_response(gw: Gateway, tenant: str, query_id: str, first: str = "", headers: dict | None = None
                    ) -> StreamingResponse:
    """The query's events; with ``first`` (the submission's ``accepted``) every event is replayed, even when the
    query ended before the stream subscribed; a follower that comes after the end gets the status and result."""
    async def body() -> AsyncIterator[str]:
        if first:
            yield first
        async for chunk in _Follow(gw, tenant, query_id, replay=bool(first)).events():
            yield chunk

    return StreamingResponse(body(), media_type="text/event-stream", headers={**SSE_HEADERS, **(headers or {})})


@router.get("/{query_id}/events", responses={200: {"description": "the query's events (Server-Sent Events)",
                                                   "content": STREAM_DOC}, **errors(401, 404, 429)},
            response_class=StreamingResponse, summary="Follow a query (Server-Sent Events)")
async def queries_events(gw: GatewayDep, who: TenantDep, query_id: QueryId) -> StreamingResponse:
    """``status`` on each change, ``map`` progress of a global query, each answer ``token``, then ``result``
    (the body of ``GET /v1/queries/{id}``) and the stream closes; a query already finished answers its status
    and result at once."""
    await run_in_threadpool(query_view, gw, who.tenant, query_id)  # 404 before any byte of the stream
    return stream_response(gw, who.tenant, query_id)
