"""The gateway end to end, bad input, API keys, health and the OpenAPI document: real Redis, real Celery
worker processes, the gateway as a uvicorn subprocess, HTTP with httpx; the only fake is the LLM simulator.

One stack serves the whole package (``live`` in conftest); the corpora (``carol``, ``synthetic``) are
ingested once for the package (conftest).
"""

from __future__ import annotations

import json

import pytest

from tests.gateway.live import MAX_BODY_BYTES, MAX_DOCUMENT_BYTES

pytestmark = pytest.mark.integration


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
