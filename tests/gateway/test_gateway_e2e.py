"""The gateway end to end: real Redis, real Celery worker processes, the gateway as a uvicorn
subprocess, HTTP with httpx; the only fake is the LLM simulator.

One stack serves the whole package (``live`` in conftest); the corpora (``carol``, ``synthetic``) are
ingested once for the package (conftest). Jobs, quotas and deletion: ``test_gateway_e2e_jobs.py``; bad input, keys and
health: ``test_gateway_e2e_input.py``.
"""

from __future__ import annotations

import json

import pytest

from shared.infra.redis.keys import Keys
from shared.infra.store.redis_graph import GraphStore
from shared.infra.tenancy.ledger import summarize
from shared.infra.tenancy.usage import read_usage
from tests.gateway.e2e_corpus import MODES, QUESTIONS, SYNTHETIC_WORDS

pytestmark = pytest.mark.integration


# ---------------------------------------------------------------- ingest -> poll -> query -> poll
def test_ingestion_job_reports_progress_usage_and_documents(live, carol):
    api, view = carol["api"], carol["view"]
    p = view["progress"]
    assert view["kind"] == "ingest" and p["documents"] == 1 and p["documents_chunked"] == 1
    assert p["chunks_total"] > 1 and p["chunks_done"] == p["chunks_total"] and p["chunks_failed"] == 0
    assert view["failures"] == []
    assert view["usage"]["calls"] > 0 and view["usage"]["prompt_tokens"] > 0
    assert {"extract", "report"} <= set(view["usage"]["by_stage"])
    ts = view["timestamps"]
    assert ts["created_at"] <= ts["started_at"] <= ts["finished_at"]
    docs = api.get("/v1/documents").json()
    assert docs["total"] == 1 and docs["items"][0]["id"] == "carol-a"
    assert docs["items"][0]["status"] == "processed" and docs["items"][0]["chunks"] == p["chunks_total"]
    assert api.get("/v1/documents/carol-a").json()["status"] == "processed"
    stats = api.get("/v1/graph/stats").json()
    assert stats == GraphStore(live.redis, api.id).stats()
    assert stats["documents"] == 1 and stats["entities"] > 0 and stats["reports"] > 0


@pytest.mark.parametrize("mode", MODES)
def test_query_every_mode_through_the_gateway(carol, mode):
    api = carol["api"]
    r = api.submit_query(mode=mode, query=QUESTIONS[mode], response_type="bullet_points")
    assert r.status_code == 202, r.text
    accepted = r.json()
    assert r.headers["Location"] == f"/v1/queries/{accepted['query_id']}" == accepted["location"]
    assert accepted["status"] == "queued" and int(r.headers["Retry-After"]) >= 1
    result = api.wait_query(accepted["query_id"])
    assert result["status"] == "succeeded", result
    assert result["mode"] == mode and result["answer"].strip() and result["answer_kind"] == "llm"
    budget = result["budget"]
    assert 0 < budget["total_tokens"] <= budget["total_allowed"] <= budget["model_limit"]
    assert result["total_usage"]["calls"] > 0 and result["total_usage"]["prompt_tokens"] > 0
    sources = result["sources"]
    assert any(sources[k] for k in ("entities", "relations", "reports", "chunks"))
    assert set(sources["documents"]) <= {"carol-a"}
    carol["queries"][mode] = result["query_id"]


def test_query_wait_returns_the_result_with_200(carol):
    r = carol["api"].post("/v1/queries", params={"wait": 60},
                          json={"mode": "naive", "query": "Who visits Scrooge first?", "max_total_tokens": 2500})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["status"] == "succeeded" and body["answer"]
    assert r.headers["Location"] == f"/v1/queries/{body['query_id']}"
    assert body["budget"]["total_allowed"] <= 2500  # the budget override reached the worker
    assert carol["api"].get(r.headers["Location"]).json()["answer"] == body["answer"]


def test_only_need_context_returns_context_without_an_answer_call(carol):
    body = carol["api"].query(mode="local", query="Describe Marley's ghost.", only_need_context=True)
    assert body["status"] == "succeeded" and body["context"]
    assert body["total_usage"]["completion_tokens"] == 0


def test_graph_entity_and_export(live, carol):
    api = carol["api"]
    store = GraphStore(live.redis, api.id)
    name = max(store.all_entities().values(), key=lambda e: e.degree).name
    entity = api.get(f"/v1/graph/entities/{name}")
    assert entity.status_code == 200, entity.text
    body = entity.json()
    assert body["name"] == name and body["sources"]["documents"] == ["carol-a"] and body["neighbors"]
    assert api.get(f"/v1/graph/entities/{name.lower()}").json()["name"] == name
    assert api.get("/v1/graph/entities/NO-SUCH-ENTITY").status_code == 404
    export = api.get("/v1/graph/export", params={"format": "graphml"})
    assert export.status_code == 200 and export.headers["content-type"].startswith("application/graphml+xml")
    import networkx as nx

    graph = nx.parse_graphml(export.text)
    assert graph.number_of_nodes() == len(store.all_entities())
    assert graph.number_of_edges() == len(store.all_relations())


def test_usage_equals_the_sum_of_per_call_records(live, carol):
    api = carol["api"]
    records = read_usage(live.redis, api.id)
    assert records and all(r.tenant == api.id for r in records)
    expected = summarize(records)["totals"]
    body = api.get("/v1/usage").json()
    assert body["tenant"] == api.id and body["totals"] == expected
    # outside any job, only the query worker's embedder probe (``shared/infra/store/warmup.py``): booked to the tenant
    # whose index started it, in its own thread, so it may land before or after the ingestion's end
    outside = [r for r in records if not r.job_id]
    assert all(r.stage == "embed" and r.queue == "query" for r in outside) and len(outside) <= 1
    job_ids = {r.job_id for r in records if r.job_id}
    usage_by_job = [api.get(f"/v1/jobs/{j}").json()["usage"] for j in job_ids]
    assert sum(u["calls"] for u in usage_by_job) + len(outside) == expected["calls"]
    assert sum(u["prompt_tokens"] for u in usage_by_job) + sum(r.prompt_tokens for r in outside) \
        == expected["prompt_tokens"]
    assert sum(u["completion_tokens"] for u in usage_by_job) == expected["completion_tokens"]
    for group_by in ("day", "model", "stage"):
        grouped = api.get("/v1/usage", params={"group_by": group_by}).json()
        assert grouped["totals"] == expected
        for field in ("calls", "prompt_tokens", "completion_tokens", "cache_hits"):
            assert sum(g[field] for g in grouped["groups"]) == expected[field]
    stages = {g["key"] for g in api.get("/v1/usage", params={"group_by": "stage"}).json()["groups"]}
    assert {"extract", "report"} <= stages
    assert api.get("/v1/usage", params={"from": "2999-01-01"}).json()["totals"]["calls"] == 0
    first = min(r.ts for r in records)
    assert api.get("/v1/usage", params={"from": str(first)}).json()["totals"] == expected


# ---------------------------------------------------------------- tenant isolation
def _entity_names(live, tenant: str) -> set[str]:
    return set(GraphStore(live.redis, tenant).all_entities())


def test_tenants_never_see_each_other(live, carol, synthetic):
    a, b = carol["api"], synthetic["api"]
    if not carol["queries"]:
        carol["queries"]["local"] = a.query(mode="local", query=QUESTIONS["local"])["query_id"]
    names_a, names_b = _entity_names(live, a.id), _entity_names(live, b.id)
    only_b = sorted(names_b - names_a)
    assert any(w.upper() in n for n in only_b for w in SYNTHETIC_WORDS)
    b_ids = {"docs": synthetic["doc_ids"], "jobs": [synthetic["job_id"]], "queries": [synthetic["query_id"]]}
    a_ids = {"docs": ["carol-a"], "jobs": [carol["job_id"]], "queries": list(carol["queries"].values())}
    for me, other, other_ids, other_only in ((a, b, b_ids, only_b), (b, a, a_ids, sorted(names_a - names_b))):
        _assert_no_access(live, me, other, other_ids, other_only)
    # A asks about B's invented world: nothing of B comes back (context, sources, answer)
    for mode in ("local", "hybrid", "naive", "global"):
        body = a.query(mode=mode, query="Who is Velmora Thistlewick of Port Azurine and what is Merrowdeep?",
                       include_context=True)
        assert body["status"] == "succeeded", body
        retrieved = json.dumps([body["context"], body["sources"], body["citations"]]).lower()
        assert not [w for w in SYNTHETIC_WORDS if w in retrieved], mode
        assert set(body["sources"]["documents"]) <= {"carol-a"}
        assert not set(body["sources"]["entities"]) & set(only_b)


def _assert_no_access(live, me, other, other_ids: dict, other_only_entities: list[str]) -> None:
    own_docs = {d["id"] for d in me.get("/v1/documents", params={"limit": 500}).json()["items"]}
    assert not own_docs & set(other_ids["docs"])
    for doc_id in other_ids["docs"]:
        assert me.get(f"/v1/documents/{doc_id}").status_code == 404
        assert me.delete(f"/v1/documents/{doc_id}").status_code == 404
        assert other.get(f"/v1/documents/{doc_id}").status_code == 200  # still there
    for job_id in other_ids["jobs"]:
        assert me.get(f"/v1/jobs/{job_id}").status_code == 404
        assert me.post(f"/v1/jobs/{job_id}/cancel").status_code == 404
        assert me.get(f"/v1/queries/{job_id}").status_code == 404
    for query_id in other_ids["queries"]:
        assert me.get(f"/v1/queries/{query_id}").status_code == 404
        assert me.get(f"/v1/jobs/{query_id}").status_code == 404
        assert other.get(f"/v1/queries/{query_id}").json()["status"] == "succeeded"
    for name in other_only_entities[:10]:
        assert me.get(f"/v1/graph/entities/{name}").status_code == 404
    export = me.get("/v1/graph/export").text
    assert not [n for n in other_only_entities if f'"{n}"' in export]
    other_chunks = [c.decode() for c in live.redis.smembers(Keys(other.id).chunks())]
    assert other_chunks and not [c for c in other_chunks if c in export]
    assert me.get("/v1/graph/stats").json() == GraphStore(live.redis, me.id).stats()
    usage = me.get("/v1/usage", params={"group_by": "stage"}).json()
    assert usage["tenant"] == me.id and usage["totals"] == summarize(read_usage(live.redis, me.id))["totals"]
    assert me.get(f"/v1/tenants/{other.id}").status_code == 401
    assert me.post(f"/v1/tenants/{other.id}/keys", json={}).status_code == 401
