"""One JSON for jobs, documents, cancels and usage (``shared/public_json.py``): the gateway's response bytes and
the CLI's local backend (``graphfleet jobs|documents|usage`` without ``GRAPHFLEET_URL``) are the same, and the
shapes are pinned field by field."""

from __future__ import annotations

import json

from graphfleet_cli.manage import LocalBackend
from shared.domain.models import Document
from shared.infra.jobs.store import JobStore
from shared.infra.store.redis_graph import GraphStore
from shared.public_json import document_json, job_json, job_view

REFUSED = [{"doc_id": "bad-1", "name": "bad.bin", "index": 1, "stage": "validate", "code": "unsupported_file_type",
            "cause": "bad.bin: not a text, PDF, HTML or DOCX file"}]


def _as_sent(body) -> bytes:
    """``body`` encoded as the gateway's ``JSONResponse`` encodes it."""
    return json.dumps(body, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode("utf-8")


def _jobs(redis, tenant: str) -> dict[str, str]:
    jobs = JobStore(redis, tenant)
    jobs.create("job-run", "ingest", doc_ids=["d1"], refused=REFUSED)
    jobs.mark_running("job-run", "extract")
    jobs.mark_stage_time("job-run", "chunk")
    jobs.create("job-done", "delete", doc_ids=["d1"])
    jobs.finish("job-done", "succeeded")
    jobs.create("qry-done", "query", params={"query": "who?"})
    jobs.finish("qry-done", "succeeded", result=json.dumps({"answer": "Scrooge"}))
    return {"running": "job-run", "ended": "job-done", "query": "qry-done"}


def _documents(redis, tenant: str) -> list[str]:
    store = GraphStore(redis, tenant)
    store.put_document(Document(id="d1", tenant=tenant, title="Stave Ünë", status="processed",
                                metadata={"source": "gutenberg"}, chunk_ids=["c1", "c2"], created_at=1717000000.5),
                       "text one")
    store.put_document(Document(id="d2", tenant=tenant, title="broken", status="failed", error="no text",
                                created_at=1717000001.0), "text two")
    return ["d1", "d2"]


def test_gateway_and_cli_local_backend_send_the_same_bytes(api, alice, gw_redis):
    tenant, headers = alice["id"], alice["headers"]
    job_ids, doc_ids = _jobs(gw_redis, tenant), _documents(gw_redis, tenant)
    local = LocalBackend()
    try:
        for job_id in job_ids.values():
            r = api.get(f"/v1/jobs/{job_id}", headers=headers)
            assert r.status_code == 200 and r.content == _as_sent(local.get_job(tenant, job_id))
        r = api.get("/v1/jobs", params={"limit": 10}, headers=headers)
        assert r.content == _as_sent(local.list_jobs(tenant, 0, 10, None, None))
        assert r.json()["total"] == 3
        for doc_id in doc_ids:
            r = api.get(f"/v1/documents/{doc_id}", headers=headers)
            assert r.status_code == 200 and r.content == _as_sent(local.get_document(tenant, doc_id))
        page = api.get("/v1/documents", params={"limit": 10}, headers=headers)
        local_page = local.list_documents(tenant, 0, 10, None)
        assert [d["id"] for d in local_page["items"]] == doc_ids
        assert page.content == _as_sent(local_page)
        failed = api.get("/v1/documents", params={"status": "failed"}, headers=headers)
        assert failed.content == _as_sent(local.list_documents(tenant, 0, 50, "failed"))
        r = api.post(f"/v1/jobs/{job_ids['ended']}/cancel", headers=headers)
        assert r.status_code == 200 and r.content == _as_sent(local.cancel_job(tenant, job_ids["ended"]))
        assert r.json()["canceled"] is False
        r = api.get("/v1/usage", params={"from": "2020-01-01", "to": "2020-01-02", "group_by": "day"},
                    headers=headers)
        assert r.status_code == 200 and r.content == _as_sent(local.usage(tenant, "2020-01-01", "2020-01-02", "day"))
    finally:
        local.close()


def test_a_running_job_is_canceled_with_the_same_message_both_ways(api, alice, gw_redis):
    tenant, headers = alice["id"], alice["headers"]
    jobs = JobStore(gw_redis, tenant)
    for job_id in ("job-a", "job-b"):
        jobs.create(job_id, "ingest", doc_ids=["d1"])
        jobs.mark_running(job_id, "extract")
    local = LocalBackend()
    try:
        over_http = api.post("/v1/jobs/job-a/cancel", headers=headers).json()
        here = local.cancel_job(tenant, "job-b")
    finally:
        local.close()
    assert over_http["canceled"] is here["canceled"] is True
    assert over_http["message"] == here["message"]
    assert here["message"].startswith("canceled during extract: 0 of 0 chunks extracted (0 failed) across 1 document")
    assert {**over_http, "job_id": "job-b"} == here


VIEW = {"id": "job-1", "tenant": "t", "kind": "ingest", "status": "running", "stage": "extract",
        "progress": {"documents": 1, "chunks_total": 4, "chunks_done": 2, "chunks_failed": 1, "stage": "extract"},
        "failures": [{"chunk_id": "c1", "stage": "extract", "cause": "LLM timeout", "attempts": 3}],
        "usage": {"calls": 3, "prompt_tokens": 10, "completion_tokens": 2, "cost_usd": 0.001, "by_stage": {}},
        "created_at": 1.5, "started_at": 2.5, "updated_at": 3.5, "stage_times": {"chunk": 0.25},
        "result": {"x": 1}, "resumes": 2}


def test_the_job_body_field_by_field():
    assert list(job_json(VIEW).items()) == [
        ("job_id", "job-1"), ("kind", "ingest"), ("status", "running"), ("stage", "extract"),
        ("progress", VIEW["progress"]), ("failures", VIEW["failures"]), ("usage", VIEW["usage"]),
        ("timestamps", {"created_at": 1.5, "started_at": 2.5, "updated_at": 3.5, "finished_at": None}),
        ("stage_times", {"chunk": 0.25}), ("error", None), ("result", {"x": 1}), ("waiting", None)]
    query = job_json({**VIEW, "kind": "query", "waiting": {"message": "waiting for the LLM"}})
    assert query["result"] is None and query["waiting"] == {"message": "waiting for the LLM"}
    bare = job_json({"id": "j", "status": "queued", "progress": {}, "failures": [], "usage": {}})
    assert bare["kind"] == "" and bare["stage_times"] == {} and set(bare["timestamps"].values()) == {None}


def test_the_http_client_reads_the_job_body_back_into_a_view():
    body = job_json(VIEW)
    view = job_view(body)
    assert job_json(view) == body  # the public JSON survives the round trip
    assert view["id"] == "job-1" and view["created_at"] == 1.5 and "finished_at" not in view
    assert {k: view[k] for k in ("status", "progress", "failures", "usage", "stage_times")} == \
        {k: VIEW[k] for k in ("status", "progress", "failures", "usage", "stage_times")}
    assert "resumes" not in view and "tenant" not in view  # what the public JSON does not carry stays lost


def test_the_document_body_field_by_field():
    doc = Document(id="d1", tenant="t", title="T", status="processed", metadata={"a": "b"}, chunk_ids=["c1", "c2"],
                   created_at=5.0, text_hash="h")
    assert list(document_json(doc).items()) == [("id", "d1"), ("title", "T"), ("status", "processed"),
                                                ("metadata", {"a": "b"}), ("chunks", 2), ("created_at", 5.0),
                                                ("error", None)]
