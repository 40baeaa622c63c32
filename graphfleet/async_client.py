"""``graphfleet.AsyncClient``: the asyncio client of the gateway's HTTP API (same methods as ``Client``, awaited)."""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx

from graphfleet import models as m
from graphfleet._base import (
    RETRY_STATUSES,
    Call,
    Operations,
    SseParser,
    client_settings,
    headers_for,
    raise_for,
    retry_after,
)
from graphfleet.errors import GraphfleetError, TransportError


class AsyncClient(Operations):
    """As :class:`graphfleet.Client`; every operation is a coroutine, ``query_stream`` an async iterator."""

    def __init__(self, base_url: str | None = None, api_key: str | None = None, *, timeout: float = 120.0,
                 max_retries: int = 5, max_retry_delay: float = 30.0,
                 transport: httpx.AsyncBaseTransport | None = None, user_agent: str = "graphfleet-python"):
        self.base_url, self.api_key = client_settings(base_url, api_key)
        self.max_retries, self.max_retry_delay = max_retries, max_retry_delay
        self.http = httpx.AsyncClient(base_url=self.base_url, timeout=timeout, transport=transport,
                                      headers=headers_for(self.api_key, user_agent))

    async def aclose(self) -> None:
        await self.http.aclose()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc) -> None:
        await self.aclose()

    async def _send(self, call: Call) -> httpx.Response:
        for attempt in range(self.max_retries + 1):
            try:
                response = await self.http.request(call.method, call.path, **call.kwargs())
            except httpx.TransportError as exc:
                raise TransportError(f"cannot reach the gateway at {self.base_url}: {exc}") from exc
            if response.status_code in RETRY_STATUSES and attempt < self.max_retries:
                await asyncio.sleep(retry_after(response, attempt, self.max_retry_delay))
                continue
            raise_for(response)
            return response
        raise AssertionError("unreachable")

    async def _call(self, call: Call) -> Any:
        return call.parse(await self._send(call))

    async def wait_job(self, job_id: str, *, timeout: float = 3600.0, poll: float = 1.0,
                       progress: Callable[[m.Job], Any] | None = None) -> m.Job:
        """Until the job ends, each request held by the gateway up to ``poll`` seconds (``?wait``: answered as soon as
        the job ends); ``progress(job)`` (a function or a coroutine function) sees every view."""
        deadline = time.monotonic() + timeout
        while True:
            asked = time.monotonic()
            job = await self.get_job(job_id, wait=max(0.0, min(poll, deadline - asked)))
            if progress and inspect.isawaitable(shown := progress(job)):
                await shown
            if job.finished:
                return job
            if time.monotonic() > deadline:
                raise TimeoutError(f"job {job_id} not finished after {timeout}s")
            await asyncio.sleep(max(0.0, poll - (time.monotonic() - asked)))  # an older gateway answered at once

    async def query(self, query: str, *, mode: str = "local", timeout: float = 300.0, poll: float = 1.0,
                    **params) -> m.QueryResult:
        deadline = time.monotonic() + timeout
        out = await self.submit_query(query, mode=mode, wait=min(timeout, 60.0), **params)
        while not isinstance(out, m.QueryResult) or not out.finished:
            if time.monotonic() > deadline:
                raise TimeoutError(f"query {out.query_id} not finished after {timeout}s")
            if isinstance(out, m.QueryResult):
                await asyncio.sleep(poll)
            out = await self.get_query(out.query_id)
        return out

    async def query_stream(self, query: str, *, mode: str = "local", timeout: float = 300.0,
                           **params) -> AsyncIterator[m.Event]:
        body = {"query": query, "mode": mode, **params, "stream": True}
        async for event in self._events("POST", "/v1/queries", timeout, json=body):
            yield event

    async def query_events(self, query_id: str, *, timeout: float = 300.0) -> AsyncIterator[m.Event]:
        async for event in self._events("GET", f"/v1/queries/{query_id}/events", timeout):
            yield event

    async def _events(self, method: str, path: str, timeout: float, **kwargs) -> AsyncIterator[m.Event]:
        try:
            async with self.http.stream(method, path, headers={"Accept": "text/event-stream"}, timeout=timeout,
                                        **kwargs) as response:
                if response.status_code >= 400:
                    await response.aread()
                    raise_for(response)
                if not response.headers.get("content-type", "").startswith("text/event-stream"):
                    raise GraphfleetError(f"{method} {path} did not answer with an event stream "
                                          f"({response.status_code} {response.headers.get('content-type')})")
                parser = SseParser()
                async for line in response.aiter_lines():
                    if (event := parser.feed(line)) is not None:
                        yield event
                if (event := parser.feed("")) is not None:
                    yield event
        except httpx.TransportError as exc:
            raise TransportError(f"event stream from {self.base_url} broke: {exc}") from exc
