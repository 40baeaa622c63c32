"""A query job's parameters in and result out, and the tenant's preset (real Redis)."""

from __future__ import annotations

import json

from shared.config import Settings
from shared.domain.query.result import QueryResult
from shared.infra.jobs.query_record import query_param, save_result, tenant_preset
from shared.infra.jobs.store import JobStore
from shared.infra.tenancy.tenants import Tenant, TenantStore


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


def test_a_result_keeps_whole_evidence_only_when_it_carries_its_context(redis_client, tenant):
    from shared.domain.query.context_common import Evidence, Sources
    from shared.infra.jobs.query_record import SNIPPET_CHARS, snippet

    passage = "Marley was dead: to begin with. " * 40
    jobs = JobStore(redis_client, tenant)

    def saved(**fields) -> dict:
        query_id = f"qry-{len(fields)}"
        jobs.create(query_id, "query", params={"query": "who is Marley?", "mode": "naive"})
        sources = Sources()
        sources.add(Evidence(kind="chunk", cite="c1", key="c1", text=passage, doc_ids=["d1"], score=0.9))
        save_result(jobs, query_id, QueryResult(mode="naive", answer="a ghost", answer_kind="llm", sources=sources,
                                                **fields))
        return json.loads(jobs.get_field(query_id, "result"))["sources"]["evidence"][0]

    short = saved()
    assert short["text"] == snippet(passage) and passage.startswith(short["text"].removesuffix("…"))
    kept = short["text"].removesuffix("…")
    assert len(kept) <= SNIPPET_CHARS and short["text"].endswith("…") and passage[len(kept)] == " "  # between words
    assert (short["cite"], short["doc_ids"], short["score"]) == ("c1", ["d1"], 0.9)
    assert saved(context="the context")["text"] == passage  # include_context / only_need_context: whole
    assert snippet("short text") == "short text"
