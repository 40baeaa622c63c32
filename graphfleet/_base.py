"""What the sync and async clients share: the API's operations as request descriptions, error mapping, retries.

Every operation method returns ``self._call(Call(...))``: the sync client runs it and returns the parsed result,
the async client returns an awaitable of it. Only the loops (waiting, polling, streaming) are written twice.
"""

from __future__ import annotations

import json
import mimetypes
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from graphfleet import models as m
from graphfleet.errors import error_for

DEFAULT_URL = "http://127.0.0.1:8080"
RETRY_STATUSES = (429, 503)
FILE_SUFFIXES = {".txt", ".md", ".markdown", ".text", ".pdf", ".html", ".htm", ".docx"}  # what a directory uploads
MAX_WAIT_S = 60.0  # the gateway holds POST /v1/queries?wait= and GET /v1/jobs/{id}?wait= at most this long


@dataclass
class Call:
    method: str
    path: str
    params: dict[str, Any] | None = None
    json: Any = None
    files: list | None = None
    data: dict[str, str] | None = None  # form fields sent with ``files``
    headers: dict[str, str] = field(default_factory=dict)
    parse: Callable[[httpx.Response], Any] = lambda r: r.json()
    timeout: float | None = None

    def kwargs(self) -> dict:
        out: dict[str, Any] = {"params": {k: v for k, v in (self.params or {}).items() if v is not None}}
        if self.json is not None:
            out["json"] = self.json
        if self.files is not None:
            out["files"] = self.files
        if self.data is not None:
            out["data"] = self.data
        if self.headers:
            out["headers"] = self.headers
        if self.timeout is not None:
            out["timeout"] = self.timeout
        return out


def model(cls) -> Callable[[httpx.Response], Any]:
    return lambda r: cls.model_validate(r.json())


def retry_after(response: httpx.Response, attempt: int, max_delay: float) -> float:
    """Seconds to wait before retrying: ``Retry-After`` (seconds) when given, else exponential; capped."""
    try:
        delay = float(response.headers["Retry-After"])
    except (KeyError, ValueError):
        delay = 0.5 * 2 ** attempt
    return min(max(delay, 0.05), max_delay)


def raise_for(response: httpx.Response) -> None:
    if response.status_code < 400:
        return
    try:
        body = response.json()
    except ValueError:
        body = None
    try:
        after = float(response.headers.get("Retry-After", ""))
    except ValueError:
        after = None
    raise error_for(response.status_code, body, response.text, after)


def collect_files(paths: Iterable[str | os.PathLike]) -> list[Path]:
    """Files of ``paths``; a directory contributes its files with a ``FILE_SUFFIXES`` suffix (recursively, sorted)."""
    files: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            files.extend(sorted(p for p in path.rglob("*") if p.is_file() and p.suffix.lower() in FILE_SUFFIXES))
        elif path.is_file():
            files.append(path)
        else:
            raise FileNotFoundError(f"no such file or directory: {raw}")
    return files


def client_settings(base_url: str | None, api_key: str | None) -> tuple[str, str | None]:
    """The gateway URL and key: the arguments, else ``GRAPHFLEET_URL`` / ``GRAPHFLEET_API_KEY``."""
    url = base_url or os.environ.get("GRAPHFLEET_URL") or DEFAULT_URL
    return url.rstrip("/"), api_key if api_key is not None else os.environ.get("GRAPHFLEET_API_KEY")


def headers_for(api_key: str | None, user_agent: str) -> dict[str, str]:
    headers = {"User-Agent": user_agent}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    return headers


def parse_sse(lines: Iterable[str]):
    """Server-sent events of ``lines`` (without their line endings) as ``(event, data)``; ``data`` parsed JSON."""
    event, data = "message", []
    for line in lines:
        if line == "":
            if data:
                yield m.Event(event, _json("\n".join(data)))
            event, data = "message", []
        elif line.startswith(":"):
            continue
        else:
            name, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            if name == "event":
                event = value
            elif name == "data":
                data.append(value)
    if data:
        yield m.Event(event, _json("\n".join(data)))


class SseParser:
    """Incremental form of :func:`parse_sse` for async streams: ``feed(line)`` returns a finished event or None."""

    def __init__(self):
        self.event, self.data = "message", []

    def feed(self, line: str) -> m.Event | None:
        if line == "":
            out = m.Event(self.event, _json("\n".join(self.data))) if self.data else None
            self.event, self.data = "message", []
            return out
        if not line.startswith(":"):
            name, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            if name == "event":
                self.event = value
            elif name == "data":
                self.data.append(value)
        return None


def _json(text: str) -> dict:
    try:
        value = json.loads(text)
    except ValueError:
        return {"raw": text}
    return value if isinstance(value, dict) else {"value": value}


class Operations:
    """The API's operations; subclasses define ``_call``."""

    def _call(self, call: Call) -> Any:  # pragma: no cover - defined by the clients
        raise NotImplementedError

    # ------------------------------------------------------------ tenants and keys (admin key)
    def create_tenant(self, id: str | None = None, *, name: str = "", tier: str | None = None,  # noqa: A002
                      preset: str | None = None, limits: dict | None = None):
        body: dict[str, Any] = {"name": name}
        for key, value in (("id", id), ("tier", tier), ("preset", preset), ("limits", limits)):
            if value is not None:
                body[key] = value
        return self._call(Call("POST", "/v1/tenants", json=body, parse=model(m.Tenant)))

    def get_tenant(self, tenant_id: str):
        return self._call(Call("GET", f"/v1/tenants/{tenant_id}", parse=model(m.Tenant)))

    def list_tenants(self):
        """``GET /v1/tenants`` (admin); gateways without that route answer 404/405 (``ApiError``)."""
        return self._call(Call("GET", "/v1/tenants", parse=lambda r: [m.Tenant.model_validate(t) for t in
                                                                      _items(r.json())]))

    def current_tenant(self):
        """The tenant of the client's API key."""
        return self._call(Call("GET", "/v1/tenant", parse=model(m.Tenant)))

    def create_key(self, tenant_id: str, name: str = ""):
        return self._call(Call("POST", f"/v1/tenants/{tenant_id}/keys", json={"name": name}, parse=model(m.ApiKey)))

    def revoke_key(self, tenant_id: str, key_id: str):
        return self._call(Call("DELETE", f"/v1/tenants/{tenant_id}/keys/{key_id}", parse=model(m.KeyRevoked)))

    # ------------------------------------------------------------ documents
    def ingest(self, documents: list[dict], *, idempotency_key: str | None = None, atomic: bool = False):
        """A JSON batch: each document ``{"text", "id"?, "title"?, "metadata"?}``. An invalid document is refused
        (listed in ``refused``) and the others ingested; ``atomic`` refuses the whole batch instead."""
        body: dict[str, Any] = {"documents": documents, **({"atomic": True} if atomic else {})}
        return self._call(Call("POST", "/v1/documents", json=body,
                               headers=_idem(idempotency_key), parse=model(m.JobAccepted)))

    def ingest_text(self, text: str, *, id: str | None = None, title: str = "",  # noqa: A002
                    metadata: dict[str, str] | None = None, idempotency_key: str | None = None):
        doc: dict[str, Any] = {"text": text, "title": title, "metadata": metadata or {}}
        if id is not None:
            doc["id"] = id
        return self.ingest([doc], idempotency_key=idempotency_key)

    def ingest_bytes(self, data: bytes, filename: str = "document.txt", *, idempotency_key: str | None = None):
        """Upload one file's content (multipart; the file name's suffix tells the gateway its type)."""
        return self.ingest_files([(filename, data)], idempotency_key=idempotency_key)

    def ingest_paths(self, paths: Iterable[str | os.PathLike], *, idempotency_key: str | None = None):
        """Upload files (the gateway says which types it accepts); a directory uploads its .txt/.md/.pdf/.html/.docx
        files."""
        files = collect_files(paths)
        if not files:
            raise FileNotFoundError("no files to upload found")
        return self.ingest_files([(f.name, f.read_bytes()) for f in files], idempotency_key=idempotency_key)

    def ingest_files(self, files: list[tuple[str, bytes]], *, idempotency_key: str | None = None,
                     atomic: bool = False):
        upload = [("files", (name, data, mimetypes.guess_type(name)[0] or "application/octet-stream"))
                  for name, data in files]
        return self._call(Call("POST", "/v1/documents", files=upload, headers=_idem(idempotency_key),
                               data={"atomic": "true"} if atomic else None,
                               parse=model(m.JobAccepted)))

    def list_documents(self, *, offset: int = 0, limit: int = 50, status: str | None = None):
        return self._call(Call("GET", "/v1/documents", params={"offset": offset, "limit": limit, "status": status},
                               parse=model(m.DocumentPage)))

    def get_document(self, doc_id: str):
        return self._call(Call("GET", f"/v1/documents/{doc_id}", parse=model(m.Document)))

    def delete_document(self, doc_id: str, *, idempotency_key: str | None = None):
        """Starts a deletion job (wait for it with ``wait_job``)."""
        return self._call(Call("DELETE", f"/v1/documents/{doc_id}", headers=_idem(idempotency_key),
                               parse=model(m.JobAccepted)))

    # ------------------------------------------------------------ jobs
    def get_job(self, job_id: str, *, wait: float = 0):
        """``GET /v1/jobs/{id}``; with ``wait`` (at most 60 s) the gateway holds an unfinished job's answer until it
        ends or the seconds pass (an older gateway answers at once)."""
        wait = min(max(wait, 0.0), MAX_WAIT_S)
        return self._call(Call("GET", f"/v1/jobs/{job_id}", params={"wait": wait or None},
                               timeout=wait + 30 if wait else None, parse=model(m.Job)))

    def list_jobs(self, *, offset: int = 0, limit: int = 50, status: str | None = None, kind: str | None = None):
        """``GET /v1/jobs`` (newest first); gateways without that route answer 404/405 (``ApiError``)."""
        params = {"offset": offset, "limit": limit, "status": status, "kind": kind}
        return self._call(Call("GET", "/v1/jobs", params=params, parse=model(m.JobPage)))

    def cancel_job(self, job_id: str):
        return self._call(Call("POST", f"/v1/jobs/{job_id}/cancel", parse=model(m.CancelResult)))

    # ------------------------------------------------------------ queries
    def submit_query(self, query: str, *, mode: str = "local", wait: float = 0, idempotency_key: str | None = None,
                     **params):
        """``POST /v1/queries``: a :class:`QueryResult` when it finished within ``wait`` (at most 60 s), else a
        :class:`QueryAccepted`."""
        body = {"query": query, "mode": mode, **params}
        wait = min(max(wait, 0.0), MAX_WAIT_S)
        return self._call(Call("POST", "/v1/queries", params={"wait": wait or None}, json=body,
                               headers=_idem(idempotency_key), timeout=wait + 30 if wait else None,
                               parse=_query_submitted))

    def get_query(self, query_id: str):
        return self._call(Call("GET", f"/v1/queries/{query_id}", parse=model(m.QueryResult)))

    # ------------------------------------------------------------ usage and graph
    def usage(self, *, from_: str | float | None = None, to: str | float | None = None, group_by: str | None = None):
        """The tenant's usage ledger in [from_, to] (ISO dates/datetimes or unix seconds); ``group_by``: day,
        model or stage."""
        return self._call(Call("GET", "/v1/usage", params={"from": from_, "to": to, "group_by": group_by},
                               parse=model(m.Usage)))

    def graph_stats(self):
        return self._call(Call("GET", "/v1/graph/stats", parse=model(m.GraphStats)))

    def entity(self, name: str):
        return self._call(Call("GET", f"/v1/graph/entities/{name}", parse=model(m.Entity)))

    def export_graphml(self) -> Any:
        """The tenant's graph as GraphML bytes."""
        return self._call(Call("GET", "/v1/graph/export", params={"format": "graphml"}, parse=lambda r: r.content))


def _idem(key: str | None) -> dict[str, str]:
    return {"Idempotency-Key": key} if key else {}


def _items(body: Any) -> list:
    return body.get("items", []) if isinstance(body, dict) else list(body)


def _query_submitted(response: httpx.Response):
    body = response.json()
    return m.QueryResult.model_validate(body) if response.status_code == 200 else m.QueryAccepted.model_validate(body)
