"""Drive a gateway over HTTP (used when ``GRAPHFLEET_URL`` is set; the key comes from ``GRAPHFLEET_API_KEY``).

A thin adapter over :class:`graphfleet.Client` (the Python client, docs/client.md) offering the same methods as
:class:`graphfleet_cli.local_client.LocalClient` and returning the same shapes (job views keyed by ``id``,
``GraphStore.stats()`` counts, query results), so ``--json`` output is identical in both modes. The tenant is the
API key's; the gateway never takes it from a request.
"""

from __future__ import annotations

import time
from pathlib import Path

from graphfleet import Client
from graphfleet.errors import ApiError as GatewayError  # noqa: F401  (the CLI's name for an API error)
from graphfleet.models import TERMINAL, QueryResult
from graphfleet_cli.errors import missing_key
from graphfleet_cli.progress import ProgressLine
from shared.domain.documents import TEXT_TYPES, sniff
from shared.infra.jobs.ingest_submit import InvalidDocument, decode_bytes
from shared.public_json import job_view

API_KEY_ENV = "GRAPHFLEET_API_KEY"
ADMIN_KEY_ENV = "GRAPHFLEET_ADMIN_KEY"
MAX_WAIT_S = 60.0
MAX_POLL_S = 1.0


class HttpClient:
    def __init__(self, base_url: str, api_key: str, timeout: float = 120.0, max_rate_limit_retries: int = 5):
        if not api_key:
            raise missing_key(API_KEY_ENV, "a tenant API key")
        self.api = Client(base_url, api_key, timeout=timeout, max_retries=max_rate_limit_retries,
                          user_agent="graphfleet-cli")
        self.base_url = self.api.base_url

    def close(self) -> None:
        self.api.close()

    def __enter__(self) -> HttpClient:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def tenant(self) -> str:
        return self.api.current_tenant().id

    # ------------------------------------------------------------------ ingestion
    def ingest_files(self, tenant: str | None, files: list[Path], atomic: bool = False) -> dict:
        """Same documents as the local client (title = file name, metadata ``path``), sent as one JSON batch; a
        batch with a PDF, HTML or DOCX file, or a file that is not UTF-8 text, is uploaded as files (multipart:
        the gateway's parser workers read them, and the gateway names each file it refuses)."""
        docs = self._text_documents(files)
        if docs is None:
            body = self.api.ingest_files([(f.name, f.read_bytes()) for f in files], atomic=atomic)
        else:
            body = self.api.ingest(docs, atomic=atomic)
        return {"job_id": body.job_id, "documents": body.documents, "new_documents": body.new_documents,
                "refused": getattr(body, "refused", None) or []}

    @staticmethod
    def _text_documents(files: list[Path]) -> list[dict] | None:
        docs = []
        for f in files:
            data = f.read_bytes()
            if sniff(data) not in TEXT_TYPES:
                return None
            try:
                docs.append({"text": decode_bytes(data, f.name), "title": f.name, "metadata": {"path": str(f)}})
            except InvalidDocument:
                return None
        return docs

    def job(self, tenant: str | None, job_id: str) -> dict | None:
        from graphfleet.errors import NotFoundError

        try:
            return job_view(self.api.get_job(job_id).model_dump(mode="json"))
        except NotFoundError:
            return None

    def wait(self, tenant: str | None, job_id: str, timeout: float = 3600.0, progress: bool = False) -> dict:
        bar = ProgressLine() if progress else None
        try:
            job = self.api.wait_job(job_id, timeout=timeout, poll=MAX_POLL_S,
                                    progress=(lambda j: bar.update(job_view(j.model_dump(mode="json")))) if bar
                                    else None)
        finally:
            if bar:
                bar.close()
        return job_view(job.model_dump(mode="json"))

    # ------------------------------------------------------------------ graph
    def stats(self, tenant: str | None) -> dict:
        return self.api.graph_stats().model_dump(mode="json")

    def export_graphml(self, tenant: str | None) -> bytes:
        return self.api.export_graphml()

    # ------------------------------------------------------------------ queries
    streams = True  # query(on_token=...) prints tokens when the gateway streams query events

    def query(self, tenant: str | None, param, timeout: float = 300.0, on_token=None) -> dict:
        """Submit, hold with ``?wait`` (or follow its events with ``on_token``), then poll; returns
        ``{"query_id", "status", "error", "result"}``."""
        body = param.model_dump(mode="json", exclude_unset=True)
        text, mode = body.pop("query"), body.pop("mode", "local")
        if on_token:  # POST with "stream": true replays every token, even of a query that ends at once
            streamed = self._stream(text, mode, body, timeout, on_token)
            if streamed is not None:
                return query_done(streamed)
        out = self.api.submit_query(text, mode=mode, wait=min(timeout, MAX_WAIT_S), **body)
        deadline = time.time() + timeout
        while not isinstance(out, QueryResult) or out.status not in TERMINAL:
            if time.time() > deadline:
                raise TimeoutError(f"query {out.query_id} not finished after {timeout}s")
            if isinstance(out, QueryResult):
                time.sleep(MAX_POLL_S)
            out = self.api.get_query(out.query_id)
        return query_done(out.model_dump(mode="json", exclude_unset=True))

    def _stream(self, text: str, mode: str, body: dict, timeout: float, on_token) -> dict | None:
        """Submit with ``"stream": true``: tokens to ``on_token``, then the ``result`` body; None when the gateway
        refuses to stream before accepting the query (the caller submits and polls)."""
        from graphfleet.errors import ApiError

        try:
            for event in self.api.query_stream(text, mode=mode, timeout=timeout, **body):
                if event.event == "token":
                    on_token(str(event.data.get("text", "")))
                elif event.event == "result":
                    return event.data
        except ApiError as exc:
            if exc.status not in (404, 405, 406, 415, 422):
                raise
        return None


def query_done(body: dict) -> dict:
    """A finished ``GET /v1/queries/{id}`` body as ``{"query_id", "status", "error", "result"}``."""
    result = {k: v for k, v in body.items() if k not in ("query_id", "status", "error")}
    return {"query_id": body["query_id"], "status": body["status"], "error": body.get("error"), "result": result}
