"""A query as the API shows it (``GET /v1/queries/{id}``, and the ``result`` event of its stream)."""

from __future__ import annotations

from typing import Annotated

from fastapi import Path

from api_gateway.errors import not_found
from api_gateway.state import Gateway
from shared.infra.jobs.store import TERMINAL, JobStore

QueryId = Annotated[str, Path(min_length=1, max_length=200, examples=["qry-0f1e2d3c4b5a69788796a5b4c3d2e1f0"])]


def query_out(view: dict) -> dict:
    out = {"query_id": view["id"], "status": view["status"], "error": view.get("error")}
    if view["status"] in TERMINAL:
        out.update(view.get("result") or {})
        out.setdefault("total_usage", {k: view["usage"].get(k) for k in ("calls", "prompt_tokens",
                                                                          "completion_tokens", "cost_usd")})
    return out


def query_view(gw: Gateway, tenant: str, query_id: str) -> dict:
    view = JobStore(gw.redis, tenant).view(query_id)
    if view is None or view.get("kind") != "query":
        raise not_found("query")
    return view
