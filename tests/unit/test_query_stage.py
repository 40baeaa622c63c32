"""A query job's parameters in and result out, and the tenant's preset (real Redis)."""

from __future__ import annotations

import json

from shared.config import Settings
from shared.domain.query.result import QueryResult
from shared.infra.jobs import JobStore
from shared.infra.tenants import Tenant, TenantStore
from shared.pipeline.query_stage import query_param, save_result, tenant_preset


def test_the_tenant_record_preset_wins_over_the_deployment_map(redis_client, tenant):
    settings = Settings(redis_url="redis://unused", query={"tenant_presets": {tenant: "low_memory"}})
    tenants = TenantStore(redis_client)
    assert tenant_preset(tenants, settings, tenant) == "low_memory"
    tenants.create(Tenant(id=tenant, preset="balanced"))
    assert tenant_preset(tenants, settings, tenant) == "balanced"
    assert tenant_preset(tenants, Settings(redis_url="redis://unused"), "nobody-else") is None


def test_query_params_get_the_deployment_model_and_the_result_is_saved_with_its_usage(redis_client, tenant):
    jobs = JobStore(redis_client, tenant)
    jobs.create("qry-1", "query", params={"query": "who is Scrooge?", "mode": "naive"})
    param = query_param(jobs, "qry-1", Settings(redis_url="redis://unused", llm_model="gpt-4o-mini"))
    assert param.query == "who is Scrooge?" and param.model == "gpt-4o-mini" and param.model_context_limit > 0
    save_result(jobs, "qry-1", QueryResult(mode="naive", answer="a miser", answer_kind="extractive"))
    assert jobs.status("qry-1") == "succeeded"
    saved = json.loads(jobs.get_field("qry-1", "result"))
    assert saved["answer"] == "a miser" and saved["seconds"] >= 0 and saved["total_usage"]["calls"] == 0
