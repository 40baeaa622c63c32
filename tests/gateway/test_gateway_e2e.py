"""The gateway end to end: real Redis, real Celery worker processes, the gateway as a uvicorn
subprocess, HTTP with httpx; the only fake is the LLM simulator.

One stack serves the whole package (``live`` in conftest); corpora are ingested once per module.
"""

from __future__ import annotations

import json
import time

import pytest

from shared.infra.keys import Keys
from shared.infra.ledger import summarize
from shared.infra.llm.usage import read_usage
from shared.infra.store.redis_graph import GraphStore
from tests.conftest import SAMPLE
from tests.gateway.live import MAX_BODY_BYTES, MAX_DOCUMENT_BYTES, POLL_S, WORKER_THREADS
from tests.integration.helpers import graph_snapshot

pytestmark = pytest.mark.integration

MODES = ["local", "global", "naive", "hybrid", "causal", "graph"]
QUESTIONS = {
    "local": "Who is Scrooge and how does he treat Bob Cratchit?",
    "global": "How does Scrooge treat Bob Cratchit, his nephew Fred and the memory of Marley?",
    "naive": "What does Scrooge say about Christmas?",
    "hybrid": "How is Marley related to Scrooge?",
    "causal": "Why does Scrooge refuse his nephew's invitation?",
    "graph": "Who is the clerk of the man whose partner was Marley?",
}
SYNTHETIC = {
    "harbour.md": """# The Harbour of Port Azurine

Captain Velmora Thistlewick commanded the Brigantine Quillfeather out of Port Azurine.
Velmora Thistlewick trusted her navigator, Oskarr Brandwhistle, above every other sailor.
Oskarr Brandwhistle charted the Glimmering Shoals for the Azurine Cartographers Society.
The Azurine Cartographers Society paid Oskarr Brandwhistle in silver from the Vault of Merrowdeep.

Harbourmaster Zephyrine Oakhollow quarrelled with Velmora Thistlewick over docking fees in Port Azurine.
Zephyrine Oakhollow later joined the Azurine Cartographers Society and mapped the Glimmering Shoals.
""",
    "voyage.txt": """The voyage of the Brigantine Quillfeather began at dawn in Port Azurine.
Velmora Thistlewick sailed the Quillfeather past the Glimmering Shoals toward the Isle of Kestrelmoor.
On the Isle of Kestrelmoor, Oskarr Brandwhistle met the hermit Tobiah Fenwrought.
Tobiah Fenwrought guarded the Vault of Merrowdeep and distrusted Zephyrine Oakhollow.
Velmora Thistlewick bargained with Tobiah Fenwrought for the charts of the Glimmering Shoals.
""",
}
SYNTHETIC_WORDS = ["thistlewick", "brandwhistle", "azurine", "oakhollow", "fenwrought", "kestrelmoor",
                   "merrowdeep", "quillfeather"]


def _texts() -> tuple[str, str, str]:
    """Two disjoint slices (documents A and B of the delete test) and a longer one for cancel."""
    text = SAMPLE.read_text(encoding="utf-8-sig")
    return text[3000:20000], text[90000:107000], text[20000:90000]


# ---------------------------------------------------------------- module fixtures (ingest once)
@pytest.fixture(scope="module")
def carol(live):
    """A tenant with document A ingested through the gateway (JSON batch)."""
    api = live.new_tenant("carol")
    a, _b, _ = _texts()
    r = api.ingest(a, ids=["carol-a"])
    assert r.status_code == 202, r.text
    body = r.json()
    assert r.headers["Location"] == f"/v1/jobs/{body['job_id']}" == body["location"]
    view = api.wait_job(body["job_id"])
    assert view["status"] == "succeeded", view
    return {"api": api, "job_id": body["job_id"], "view": view, "queries": {}}


@pytest.fixture(scope="module")
def synthetic(live):
    """A tenant with an invented corpus (unique names), uploaded as .md/.txt files, and one query."""
    api = live.new_tenant("syn")
    files = [("files", (name, text.encode(), "text/plain")) for name, text in SYNTHETIC.items()]
    r = api.post("/v1/documents", files=files)
    assert r.status_code == 202, r.text
    view = api.wait_job(r.json()["job_id"])
    assert view["status"] == "succeeded", view
    query = api.query(mode="local", query="Who is Velmora Thistlewick?")
    assert query["status"] == "succeeded", query
    docs = api.get("/v1/documents").json()["items"]
    return {"api": api, "job_id": r.json()["job_id"], "query_id": query["query_id"],
            "doc_ids": [d["id"] for d in docs]}


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
    job_ids = {r.job_id for r in records}
    usage_by_job = [api.get(f"/v1/jobs/{j}").json()["usage"] for j in job_ids]
    assert sum(u["calls"] for u in usage_by_job) == expected["calls"]
    assert sum(u["prompt_tokens"] for u in usage_by_job) == expected["prompt_tokens"]
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
    _a, _b, long_text = _texts()
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
    a, b, _ = _texts()
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


# ---------------------------------------------------------------- bad input: 4xx with a reason, never 5xx
def _bad_requests() -> list[tuple[str, str, dict, int, str]]:
    def raw(body: bytes) -> dict:
        return {"content": body, "headers": {"Content-Type": "application/json"}}

    oversized = json.dumps({"documents": [{"text": "x" * (MAX_BODY_BYTES + 10)}]}).encode()
    too_big_doc = json.dumps({"documents": [{"text": "y" * (MAX_DOCUMENT_BYTES + 1)}]}).encode()
    return [
        ("POST", "/v1/documents", raw(oversized), 413, "body_too_large"),
        ("POST", "/v1/documents", {"content": (c for c in [oversized[:1000], oversized[1000:]]),
                                   "headers": {"Content-Type": "application/json"}}, 413, "body_too_large"),
        ("POST", "/v1/documents", raw(too_big_doc), 413, "document_too_large"),
        ("POST", "/v1/documents", raw(b'{"documents": [{"text": "caf\xe9"}]}'), 400, "invalid_encoding"),
        ("POST", "/v1/documents", raw(b'{"documents": [{"text": "  \\n "}]}'), 422, "empty_document"),
        ("POST", "/v1/documents", raw(b'{"documents": []}'), 422, "empty_batch"),
        ("POST", "/v1/documents", raw(b'{"documents": [{"text": "unterminated'), 400, "malformed_json"),
        ("POST", "/v1/documents", {"files": [("files", ("a.txt", b"\xff\xfe bad", "text/plain"))]}, 422,
         "invalid_encoding"),
        ("POST", "/v1/documents", {"files": [("files", ("a.pdf", b"%PDF", "application/pdf"))]}, 415,
         "unsupported_file_type"),
        ("POST", "/v1/documents", {"content": b"--x\r\nbroken", "headers": {
            "Content-Type": "multipart/form-data; boundary=x"}}, 422, "empty_batch"),
        ("POST", "/v1/queries", {"json": {"mode": "psychic", "query": "q"}}, 422, "validation_error"),
        ("POST", "/v1/queries", {"json": {"mode": "local", "query": "q", "max_total_tokens": -5}}, 422,
         "validation_error"),
        ("POST", "/v1/queries", {"json": {"mode": "local", "query": "q", "top_k": -1}}, 422, "validation_error"),
        ("POST", "/v1/queries", {"json": {"mode": "local", "query": "   "}}, 422, "empty_query"),
        ("POST", "/v1/queries", {"json": {"mode": "local", "query": "q", "tenant": "x"}}, 422, "validation_error"),
        ("POST", "/v1/queries", raw(b'{"mode": "local", "query": '), 400, "malformed_json"),
        ("POST", "/v1/queries", raw(b'{"mode": "local", "query": "caf\xe9"}'), 400, "malformed_json"),
        ("POST", "/v1/queries?wait=-1", {"json": {"mode": "local", "query": "q"}}, 422, "validation_error"),
        ("GET", "/v1/usage?group_by=week", {}, 422, "validation_error"),
        ("GET", "/v1/usage?from=yesterday", {}, 422, "invalid_time"),
        ("GET", "/v1/usage?from=2024-02-01&to=2024-01-01", {}, 422, "invalid_time_range"),
        ("GET", "/v1/graph/export?format=csv", {}, 422, "validation_error"),
        ("GET", "/v1/documents?limit=100000", {}, 422, "validation_error"),
        ("GET", "/v1/jobs/job-does-not-exist", {}, 404, "not_found"),
        ("POST", "/v1/jobs/job-does-not-exist/cancel", {}, 404, "not_found"),
        ("GET", "/v1/queries/qry-does-not-exist", {}, 404, "not_found"),
        ("DELETE", "/v1/documents/no-such-doc", {}, 404, "not_found"),
        ("PUT", "/v1/documents", {"json": {}}, 405, "method_not_allowed"),
        ("GET", "/v1/nothing-here", {}, 404, "not_found"),
    ]


def test_bad_input_is_a_4xx_with_a_reason_and_nothing_is_enqueued(live):
    api = live.new_tenant("bad")
    problems = []
    for method, path, kwargs, status, code in _bad_requests():
        r = api.http.request(method, path, **kwargs)
        body = r.json() if r.headers.get("content-type", "").startswith("application/json") else {}
        error = body.get("error") or {}
        if r.status_code != status or error.get("code") != code or not error.get("message"):
            problems.append((method, path, r.status_code, r.text[:200]))
    assert not problems, problems
    assert live.job_count(api.id) == 0 and live.document_count(api.id) == 0 and live.messages_for(api.id) == 0
    assert api.get("/v1/documents").json()["total"] == 0
    assert api.get("/v1/usage").json()["totals"]["calls"] == 0


def test_unknown_and_revoked_keys_are_401_over_http(live):
    api = live.new_tenant("keys")
    assert api.get("/v1/tenant").json()["id"] == api.id
    bearer = api.http.get("/v1/tenant", headers={"X-API-Key": "", "Authorization": f"Bearer {api.key}"})
    assert bearer.status_code == 200
    r = live.admin.delete(f"/v1/tenants/{api.id}/keys/{api.key_id}")
    assert r.status_code == 200 and r.json()["revoked"] is True
    for path in ("/v1/tenant", "/v1/documents", "/v1/usage", "/v1/graph/stats"):
        r = api.get(path)
        assert r.status_code == 401 and r.json()["error"]["code"] == "invalid_api_key"
    assert api.ingest("never stored").status_code == 401
    assert live.job_count(api.id) == 0 and live.document_count(api.id) == 0


def test_health_ready_and_openapi(live):
    import httpx

    assert httpx.get(live.url + "/healthz").json() == {"status": "ok"}
    ready = httpx.get(live.url + "/readyz")
    assert ready.status_code == 200 and ready.json()["ready"] is True, ready.text
    spec = httpx.get(live.url + "/openapi.json").json()
    for path in ("/v1/documents", "/v1/documents/{doc_id}", "/v1/jobs/{job_id}", "/v1/jobs/{job_id}/cancel",
                 "/v1/queries", "/v1/queries/{query_id}", "/v1/usage", "/v1/graph/stats",
                 "/v1/graph/entities/{name}", "/v1/graph/export", "/v1/tenants", "/v1/tenants/{tenant_id}/keys"):
        assert path in spec["paths"], path
    post_docs = spec["paths"]["/v1/documents"]["post"]["requestBody"]["content"]
    assert {"application/json", "multipart/form-data"} <= set(post_docs)
    assert post_docs["application/json"]["examples"]
    assert spec["paths"]["/v1/queries"]["post"]["requestBody"]["content"]["application/json"]["examples"]
