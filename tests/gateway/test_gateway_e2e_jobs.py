"""The gateway end to end, idempotency, cancel, delete and quotas: real Redis, real Celery worker processes,
the gateway as a uvicorn subprocess, HTTP with httpx; the only fake is the LLM simulator.

One stack serves the whole package (``live`` in conftest); the corpora (``carol``, ``synthetic``) are
ingested once for the package (conftest).
"""

from __future__ import annotations

import time

import pytest

from shared.infra.store.redis_graph import GraphStore
from tests.gateway.e2e_corpus import texts
from tests.gateway.live import POLL_S, WORKER_THREADS
from tests.integration.helpers import graph_snapshot

pytestmark = pytest.mark.integration


# ---------------------------------------------------------------- idempotency
def test_idempotency_over_http(live):
    api = live.new_tenant("idem")
    key = {"Idempotency-Key": "nightly-2024-06-01"}
    first = api.ingest("Fezziwig gave a ball on Christmas Eve for his apprentices.", headers=key)
    second = api.ingest("Fezziwig gave a ball on Christmas Eve for his apprentices.", headers=key)
    assert first.status_code == second.status_code == 202
    assert first.json() == second.json() and first.headers["Location"] == second.headers["Location"]
    conflict = api.ingest("A different payload under the same key.", headers=key)
    assert conflict.status_code == 422 and conflict.json()["error"]["code"] == "idempotency_key_reused"
    assert live.job_count(api.id) == 1 and api.get("/v1/documents").json()["total"] == 1
    assert api.wait_job(first.json()["job_id"])["status"] == "succeeded"
    # after the job finished, the same key still replays the same job (no new work)
    assert api.ingest("Fezziwig gave a ball on Christmas Eve for his apprentices.", headers=key).json() == \
        first.json()
    # queries: same key + same body -> same query id; different body -> 422
    q = {"mode": "naive", "query": "Who gave a ball?"}
    a = api.post("/v1/queries", json=q, headers={"Idempotency-Key": "q-1"})
    b = api.post("/v1/queries", json=q, headers={"Idempotency-Key": "q-1"})
    assert a.status_code == b.status_code == 202 and a.json()["query_id"] == b.json()["query_id"]
    c = api.post("/v1/queries", json={**q, "mode": "local"}, headers={"Idempotency-Key": "q-1"})
    assert c.status_code == 422 and c.json()["error"]["code"] == "idempotency_key_reused"
    assert live.job_count(api.id) == 2
    # content-hash dedupe without a key: a new job, no new document
    again = api.ingest("Fezziwig gave a ball on Christmas Eve for his apprentices.").json()
    assert again["job_id"] != first.json()["job_id"] and again["new_documents"] == 0
    assert api.wait_job(again["job_id"])["status"] == "succeeded"
    assert api.get("/v1/documents").json()["total"] == 1


# ---------------------------------------------------------------- cancel
def test_cancel_mid_job_stops_between_llm_calls_and_reports_what_completed(live):
    api = live.new_tenant("cancel")
    _a, _b, long_text = texts()
    with live.slow_llm(300):
        r = api.ingest(long_text, ids=["long"])
        assert r.status_code == 202, r.text
        job_id = r.json()["job_id"]
        while True:  # until some chunks are done (the job is mid-extraction)
            view = api.get(f"/v1/jobs/{job_id}").json()
            assert view["status"] in ("queued", "running"), view
            if view["progress"]["chunks_done"] >= 1:
                break
            time.sleep(POLL_S)
        canceled = api.post(f"/v1/jobs/{job_id}/cancel")
        assert canceled.status_code == 200, canceled.text
        body = canceled.json()
        assert body["canceled"] is True and body["status"] == "canceled"
        at_cancel = body["progress"]
        assert 1 <= at_cancel["chunks_done"] < at_cancel["chunks_total"]
        assert f"{at_cancel['chunks_done']} of {at_cancel['chunks_total']} chunks" in body["message"]
        assert body["usage"]["calls"] > 0
        live.wait_settled(job_id)
    final = api.get(f"/v1/jobs/{job_id}")
    assert final.status_code == 200 and "Retry-After" not in final.headers
    final = final.json()
    assert final["status"] == "canceled" and final["timestamps"]["finished_at"]
    # tasks in flight finish at most their current chunk; nothing queued after the cancel runs
    done = final["progress"]["chunks_done"]
    assert at_cancel["chunks_done"] <= done <= at_cancel["chunks_done"] + WORKER_THREADS
    assert done < final["progress"]["chunks_total"]
    assert "merge" not in final["stage_times"]  # later stages never started
    assert api.get("/v1/graph/stats").json()["entities"] == 0
    again = api.post(f"/v1/jobs/{job_id}/cancel").json()
    assert again["canceled"] is False and again["status"] == "canceled" and "already" in again["message"]


# ---------------------------------------------------------------- delete
def test_delete_through_the_gateway_equals_never_ingested(live, carol):
    """Tenant ab ingests A and B, deletes B over HTTP; its graph equals carol's (only A)."""
    api = live.new_tenant("ab")
    a, b, _ = texts()
    view = api.ingest_and_wait(a, b, ids=["doc-a", "doc-b"])
    # the LLM cache is per tenant: carol's identical chunks of A were not reused
    assert view["usage"].get("cache_hits", 0) == 0
    assert carol["view"]["usage"].get("cache_hits", 0) == 0
    before = api.get("/v1/graph/stats").json()
    r = api.delete("/v1/documents/doc-b")
    assert r.status_code == 202, r.text
    assert r.headers["Location"] == f"/v1/jobs/{r.json()['job_id']}"
    deleted = api.wait_job(r.json()["job_id"])
    assert deleted["status"] == "succeeded" and deleted["kind"] == "delete", deleted
    assert api.get("/v1/documents/doc-b").status_code == 404
    assert api.delete("/v1/documents/doc-b").status_code == 404
    assert [d["id"] for d in api.get("/v1/documents").json()["items"]] == ["doc-a"]
    after, only_a = graph_snapshot(GraphStore(live.redis, api.id)), graph_snapshot(GraphStore(live.redis,
                                                                                               carol["api"].id))
    assert after["entities"] == only_a["entities"]
    assert after["relations"] == only_a["relations"]
    assert after["communities"] == only_a["communities"]
    stats = api.get("/v1/graph/stats").json()
    assert stats == carol["api"].get("/v1/graph/stats").json()
    assert stats["entities"] < before["entities"] and stats["documents"] == 1


# ---------------------------------------------------------------- quotas
def _assert_429(r, code: str) -> None:
    assert r.status_code == 429, r.text
    assert r.json()["error"]["code"] == code and int(r.headers["Retry-After"]) >= 1


def test_rate_limit_429_and_nothing_enqueued(live):
    api = live.new_tenant("rate", requests_per_minute=1, burst=3)
    for _ in range(3):
        assert api.get("/v1/documents").status_code == 200
    _assert_429(api.get("/v1/documents"), "rate_limited")
    _assert_429(api.ingest("Tiny Tim blessed everyone."), "rate_limited")
    _assert_429(api.submit_query(mode="naive", query="Who is Tiny Tim?"), "rate_limited")
    assert live.job_count(api.id) == 0 and live.document_count(api.id) == 0
    assert live.messages_for(api.id) == 0


def test_concurrent_job_limit_429_until_a_slot_frees(live):
    api = live.new_tenant("conc", max_concurrent_jobs=1)
    with live.slow_llm(1500):
        first = api.ingest("Mr. Fezziwig danced with Mrs. Fezziwig at the warehouse ball.")
        assert first.status_code == 202, first.text
        _assert_429(api.ingest("Belle released Scrooge from their engagement."), "too_many_jobs")
        _assert_429(api.submit_query(mode="naive", query="Who danced?"), "too_many_jobs")
        assert live.job_count(api.id) == 1 and live.document_count(api.id) == 1
        assert api.post(f"/v1/jobs/{first.json()['job_id']}/cancel").json()["status"] == "canceled"
    follow = api.ingest("Belle released Scrooge from their engagement.")
    assert follow.status_code == 202, follow.text
    assert api.wait_job(follow.json()["job_id"])["status"] == "succeeded"


def test_monthly_token_budget_429_and_nothing_enqueued(live):
    api = live.new_tenant("budget", monthly_token_budget=1)
    api.ingest_and_wait("The Ghost of Christmas Yet to Come pointed at a neglected grave.")
    live.wait_settled(api.id)  # the finished job's last task messages are acknowledged
    jobs, docs = live.job_count(api.id), live.document_count(api.id)
    _assert_429(api.ingest("Scrooge promised to honour Christmas in his heart."), "token_budget_exhausted")
    _assert_429(api.submit_query(mode="local", query="What did the ghost point at?"), "token_budget_exhausted")
    assert live.job_count(api.id) == jobs and live.document_count(api.id) == docs
    assert live.messages_for(api.id) == 0
    deleted = api.delete(f"/v1/documents/{api.get('/v1/documents').json()['items'][0]['id']}")
    assert deleted.status_code == 202, deleted.text  # deleting costs no budget
    assert api.wait_job(deleted.json()["job_id"])["status"] == "succeeded"
    assert api.get("/v1/usage").json()["totals"]["total_tokens"] >= 1
    assert api.get("/v1/graph/stats").status_code == 200  # reads are not budgeted
