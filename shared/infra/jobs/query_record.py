"""A query job's record as the query tasks use it (the job hash of ``shared.infra.jobs.store.JobStore``, written at
submission by ``shared.infra.jobs.query_submit``): its parameters read back with the deployment's defaults and the
tenant's preset, and its result stored when it ends."""

from __future__ import annotations

import json
import time
from collections.abc import Mapping

from shared.domain.query.budget import model_context_limit
from shared.domain.query.params import QueryParam
from shared.domain.query.result import PhaseUsage, QueryResult
from shared.infra.jobs.store import JobStore
from shared.infra.tenancy.tenants import TenantStore


def tenant_preset(tenants: TenantStore, settings, tenant: str) -> str | None:
    """The tenant's default preset (a query's own ``preset`` wins over it): its record's, else the deployment's
    ``query.tenant_presets`` entry for it."""
    record = tenants.get(tenant)
    return (record.preset if record is not None else None) or settings.query.tenant_presets.get(tenant)


def query_param(jobs: JobStore, query_id: str, settings, fields: Mapping[str, str | None] | None = None) -> QueryParam:
    """The submitted parameters (from ``fields`` when it holds them: read at the task's admission), with the
    deployment's model and its context limit where the query set none."""
    raw = fields["params"] if fields and "params" in fields else jobs.get_field(query_id, "params")
    param = QueryParam.model_validate(json.loads(raw or "{}"))
    if param.model is None:
        param.model = settings.llm_model
    if param.model_context_limit is None:
        param.model_context_limit = model_context_limit(param.model, table=settings.query.context_limits or None)
    return param


SNIPPET_CHARS = 300  # evidence text kept in a result that does not carry its context (``include_context``)


def snippet(text: str, limit: int = SNIPPET_CHARS) -> str:
    """``text`` cut to ``limit`` characters at a word boundary, marked with an ellipsis when cut."""
    if len(text) <= limit:
        return text
    cut = text[:limit]
    return (cut.rsplit(" ", 1)[0] if " " in cut else cut).rstrip() + "…"


def save_result(jobs: JobStore, query_id: str, result: QueryResult) -> None:
    """Finish the query with its result, the usage booked to it per phase, and its seconds since submission.
    A query with no answer at all because its retrieval was cut short ends failed. The evidence keeps its
    whole text only in a result that carries its context (the query asked for it): otherwise each item names
    its source (kind, citation, key, documents, pages, score) with a snippet, since the whole texts are the
    context again (about 130 KB for the 30,000-token default, stored, sent and parsed on every answer)."""
    usage, created = jobs.usage_and_created(query_id)
    result.usage = {stage: PhaseUsage(calls=v.get("calls", 0), prompt_tokens=v.get("prompt_tokens", 0),
                                      completion_tokens=v.get("completion_tokens", 0))
                    for stage, v in usage["by_stage"].items()}
    payload = result.model_dump(mode="json")
    if result.context is None:
        for item in payload["sources"]["evidence"]:
            item["text"] = snippet(item["text"])
    payload["seconds"] = round(time.time() - created, 4) if created is not None else 0.0
    payload["total_usage"] = {k: usage[k] for k in ("calls", "prompt_tokens", "completion_tokens", "cost_usd")}
    jobs.finish(query_id, "failed" if result.answer_kind == "none" and result.partial else "succeeded",
                result=json.dumps(payload))
