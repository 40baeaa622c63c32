"""A query job's parameters in and its result out (the job hash of ``shared.infra.jobs.JobStore``)."""

from __future__ import annotations

import json
import time

from shared.domain.query.budget import model_context_limit
from shared.domain.query.params import QueryParam
from shared.domain.query.result import PhaseUsage, QueryResult
from shared.infra.jobs import JobStore
from shared.infra.tenants import TenantStore


def tenant_preset(tenants: TenantStore, settings, tenant: str) -> str | None:
    """The tenant's default preset (a query's own ``preset`` wins over it): its record's, else the deployment's
    ``query.tenant_presets`` entry for it."""
    record = tenants.get(tenant)
    return (record.preset if record is not None else None) or settings.query.tenant_presets.get(tenant)


def query_param(jobs: JobStore, query_id: str, settings) -> QueryParam:
    """The submitted parameters, with the deployment's model and its context limit where the query set none."""
    param = QueryParam.model_validate(json.loads(jobs.get_field(query_id, "params") or "{}"))
    if param.model is None:
        param.model = settings.llm_model
    if param.model_context_limit is None:
        param.model_context_limit = model_context_limit(param.model, table=settings.query.context_limits or None)
    return param


def save_result(jobs: JobStore, query_id: str, result: QueryResult) -> None:
    """Finish the query with its result, the usage booked to it per phase, and its seconds since submission.
    A query with no answer at all because its retrieval was cut short ends failed."""
    usage = jobs.usage(query_id)
    result.usage = {stage: PhaseUsage(calls=v.get("calls", 0), prompt_tokens=v.get("prompt_tokens", 0),
                                      completion_tokens=v.get("completion_tokens", 0))
                    for stage, v in usage["by_stage"].items()}
    payload = result.model_dump(mode="json")
    started = float(jobs.get_field(query_id, "created_at") or time.time())
    payload["seconds"] = round(time.time() - started, 4)
    payload["total_usage"] = {k: usage[k] for k in ("calls", "prompt_tokens", "completion_tokens", "cost_usd")}
    jobs.finish(query_id, "failed" if result.answer_kind == "none" and result.partial else "succeeded",
                result=json.dumps(payload))
