"""Drive a gateway over HTTP (used when ``GRAPHFLEET_URL`` is set; the key comes from ``GRAPHFLEET_API_KEY``).

It offers the same methods as :class:`graphfleet_cli.local_client.LocalClient` and returns the same
shapes (job views keyed by ``id``, ``GraphStore.stats()`` counts, query results), so ``--json``
output is identical in both modes. The tenant is the API key's; the gateway never takes it from a request.
"""

from __future__ import annotations

import time
from pathlib import Path

import httpx

from graphfleet_cli.progress import ProgressLine
from shared.infra.ingest_submit import decode_bytes
from shared.infra.jobs import TERMINAL

API_KEY_ENV = "GRAPHFLEET_API_KEY"
MAX_WAIT_S = 60.0
MAX_POLL_S = 1.0


class GatewayError(RuntimeError):
    """A gateway error response, with its status and ``error.code``."""

    def __init__(self, status: int, code: str, message: str):
        super().__init__(f"gateway error {status} {code}: {message}")
        self.status, self.code, self.message = status, code, message


def _retry_after(response: httpx.Response, default: float) -> float:
    try:
        return max(0.05, float(response.headers.get("Retry-After", default)))
    except ValueError:
        return default


class HttpClient:
    def __init__(self, base_url: str, api_key: str, timeout: float = 120.0, max_rate_limit_retries: int = 5):
        if not api_key:
            raise SystemExit(f"GRAPHFLEET_URL is set: also set {API_KEY_ENV} to a tenant API key")
        self.base_url = base_url.rstrip("/")
        self.http = httpx.Client(base_url=self.base_url, timeout=timeout,
                                 headers={"Authorization": f"Bearer {api_key}", "User-Agent": "graphfleet-cli"})
        self.max_rate_limit_retries = max_rate_limit_retries

    def close(self) -> None:
        self.http.close()

    def __enter__(self) -> HttpClient:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ------------------------------------------------------------------ transport
    def request(self, method: str, path: str, expect: tuple[int, ...] = (200,), **kwargs) -> httpx.Response:
        """One request; 429s are retried after ``Retry-After``; other errors raise GatewayError."""
        for attempt in range(self.max_rate_limit_retries + 1):
            response = self.http.request(method, path, **kwargs)
            if response.status_code == 429 and attempt < self.max_rate_limit_retries:
                time.sleep(_retry_after(response, 1.0))
                continue
            if response.status_code in expect:
                return response
            raise self._error(response)
        raise AssertionError("unreachable")

    @staticmethod
    def _error(response: httpx.Response) -> GatewayError:
        try:
            err = response.json()["error"]
            return GatewayError(response.status_code, err.get("code", "error"), err.get("message", ""))
        except (ValueError, KeyError, TypeError):
            return GatewayError(response.status_code, "http_error", response.text[:300])

    # ------------------------------------------------------------------ tenant
    def tenant(self) -> str:
        return self.request("GET", "/v1/tenant").json()["id"]

    # ------------------------------------------------------------------ ingestion
    def ingest_files(self, tenant: str | None, files: list[Path]) -> dict:
        """Same documents as the local client (title = file name, metadata ``path``), sent as one JSON batch."""
        docs = [{"text": decode_bytes(f.read_bytes(), str(f)), "title": f.name, "metadata": {"path": str(f)}}
                for f in files]
        body = self.request("POST", "/v1/documents", expect=(202,), json={"documents": docs}).json()
        return {"job_id": body["job_id"], "documents": body["documents"], "new_documents": body["new_documents"]}

    def job(self, tenant: str | None, job_id: str) -> dict | None:
        response = self.request("GET", f"/v1/jobs/{job_id}", expect=(200, 404))
        return None if response.status_code == 404 else self._view(response.json())

    @staticmethod
    def _view(body: dict) -> dict:
        """The gateway's job body in ``JobStore.view()`` shape (``id``, flat timestamps)."""
        view = {"id": body["job_id"], **{k: v for k, v in body.items() if k not in ("job_id", "timestamps")}}
        view.update({k: v for k, v in (body.get("timestamps") or {}).items() if v is not None})
        return view

    def wait(self, tenant: str | None, job_id: str, timeout: float = 3600.0, progress: bool = False) -> dict:
        deadline = time.time() + timeout
        bar = ProgressLine() if progress else None
        while True:
            response = self.request("GET", f"/v1/jobs/{job_id}")
            view = self._view(response.json())
            if view["status"] in TERMINAL:
                if bar:
                    bar.update(view)
                    bar.close()
                return view
            if bar:
                bar.update(view)
            if time.time() > deadline:
                raise TimeoutError(f"job {job_id} not finished after {timeout}s")
            time.sleep(min(_retry_after(response, MAX_POLL_S), MAX_POLL_S))

    # ------------------------------------------------------------------ graph
    def stats(self, tenant: str | None) -> dict:
        return self.request("GET", "/v1/graph/stats").json()

    def export_graphml(self, tenant: str | None) -> bytes:
        return self.request("GET", "/v1/graph/export", params={"format": "graphml"}).content

    # ------------------------------------------------------------------ queries
    def query(self, tenant: str | None, param, timeout: float = 300.0) -> dict:
        """Submit, hold with ``?wait``, then poll; returns ``{"query_id", "status", "error", "result"}``."""
        body = param.model_dump(mode="json", exclude_unset=True)
        wait = min(timeout, MAX_WAIT_S)
        response = self.request("POST", "/v1/queries", expect=(200, 202), json=body, params={"wait": wait},
                                timeout=wait + 30)
        out = response.json()
        query_id = out["query_id"]
        deadline = time.time() + timeout
        while out["status"] not in TERMINAL:
            if time.time() > deadline:
                raise TimeoutError(f"query {query_id} not finished after {timeout}s")
            response = self.request("GET", f"/v1/queries/{query_id}")
            out = response.json()
            if out["status"] not in TERMINAL:
                time.sleep(min(_retry_after(response, MAX_POLL_S), MAX_POLL_S))
        result = {k: v for k, v in out.items() if k not in ("query_id", "status", "error")}
        return {"query_id": query_id, "status": out["status"], "error": out.get("error"), "result": result}
