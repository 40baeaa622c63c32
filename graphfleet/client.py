"""``graphfleet.Client``: the synchronous client of the gateway's HTTP API (httpx)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx

from graphfleet import models as m
from graphfleet._base import (
    RETRY_STATUSES,
    Call,
    Operations,
    client_settings,
    headers_for,
    parse_sse,
    raise_for,
    retry_after,
)
from graphfleet.errors import GraphfleetError, TransportError

ProgressFn = Callable[[m.Job], Any]


class Client(Operations):
    """A gateway client. ``base_url`` defaults to ``GRAPHFLEET_URL`` (else ``http://127.0.0.1:8080``), ``api_key``
    to ``GRAPHFLEET_API_KEY`` (a tenant key, or the admin key for tenants and keys).

    429 and 503 answers are retried up to ``max_retries`` times, after ``Retry-After`` (capped at
    ``max_retry_delay`` seconds); then the error is raised (:class:`graphfleet.errors.RateLimitedError` ...).
    """

    def __init__(self, base_url: str | None = None, api_key: str | None = None, *, timeout: float = 120.0,
                 max_retries: int = 5, max_retry_delay: float = 30.0, transport: httpx.BaseTransport | None = None,
                 user_agent: str = "graphfleet-python"):
        self.base_url, self.api_key = client_settings(base_url, api_key)
        self.max_retries, self.max_retry_delay = max_retries, max_retry_delay
        self.http = httpx.Client(base_url=self.base_url, timeout=timeout, transport=transport,
                                 headers=headers_for(self.api_key, user_agent))

    def close(self) -> None:
        self.http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ------------------------------------------------------------ transport
    def _send(self, call: Call) -> httpx.Response:
        for attempt in range(self.max_retries + 1):
            try:
                response = self.http.request(call.method, call.path, **call.kwargs())
            except httpx.TransportError as exc:
                raise TransportError(f"cannot reach the gateway at {self.base_url}: {exc}") from exc
            if response.status_code in RETRY_STATUSES and attempt < self.max_retries:
                time.sleep(retry_after(response, attempt, self.max_retry_delay))
                continue
            raise_for(response)
            return response
        raise AssertionError("unreachable")

    def _call(self, call: Call) -> Any:
        return call.parse(self._send(call))

    # ------------------------------------------------------------ loops
    def wait_job(self, job_id: str, *, timeout: float = 3600.0, poll: float = 1.0,
                 progress: ProgressFn | None = None) -> m.Job:
        """Until the job ends: each request is held by the gateway up to ``poll`` seconds and answered as soon as the
        job ends (``?wait``), so the end is seen when it happens; ``progress(job)`` is called with every view (the
        last one finished)."""
        deadline = time.monotonic() + timeout
        while True:
            asked = time.monotonic()
            job = self.get_job(job_id, wait=max(0.0, min(poll, deadline - asked)))
            if progress:
                progress(job)
            if job.finished:
                return job
            if time.monotonic() > deadline:
                raise TimeoutError(f"job {job_id} not finished after {timeout}s")
            time.sleep(max(0.0, poll - (time.monotonic() - asked)))  # an older gateway answered at once

    def query(self, query: str, *, mode: str = "local", timeout: float = 300.0, poll: float = 1.0,
              **params) -> m.QueryResult:
        """Submit, hold the request up to 60 s, then poll until the query ends."""
        deadline = time.monotonic() + timeout
        out = self.submit_query(query, mode=mode, wait=min(timeout, 60.0), **params)
        while not isinstance(out, m.QueryResult) or not out.finished:
            if time.monotonic() > deadline:
                raise TimeoutError(f"query {out.query_id} not finished after {timeout}s")
            if isinstance(out, m.QueryResult):
                time.sleep(poll)
            out = self.get_query(out.query_id)
        return out

    def query_stream(self, query: str, *, mode: str = "local", timeout: float = 300.0,
                     **params) -> Iterator[m.Event]:
        """Submit with ``"stream": true`` and yield the server-sent events (``accepted``, ``status``, ``map``,
        ``token``, ``result``) until the stream closes. Needs a gateway with query streaming."""
        body = {"query": query, "mode": mode, **params, "stream": True}
        yield from self._events("POST", "/v1/queries", timeout, json=body)

    def query_events(self, query_id: str, *, timeout: float = 300.0) -> Iterator[m.Event]:
        """The events of a submitted query (``GET /v1/queries/{id}/events``)."""
        yield from self._events("GET", f"/v1/queries/{query_id}/events", timeout)

    def _events(self, method: str, path: str, timeout: float, **kwargs) -> Iterator[m.Event]:
        headers = {"Accept": "text/event-stream"}
        try:
            with self.http.stream(method, path, headers=headers, timeout=timeout, **kwargs) as response:
                if response.status_code >= 400:
                    response.read()
                    raise_for(response)
                if not response.headers.get("content-type", "").startswith("text/event-stream"):
                    raise GraphfleetError(f"{method} {path} did not answer with an event stream "
                                          f"({response.status_code} {response.headers.get('content-type')})")
                yield from parse_sse(response.iter_lines())
        except httpx.TransportError as exc:
            raise TransportError(f"event stream from {self.base_url} broke: {exc}") from exc
