"""Ingestion over HTTP: JSON and upload, synchronous validation, idempotency, document lifecycle."""

from __future__ import annotations

import ast
import json

import pytest

from shared.config import reset_settings_cache
from shared.infra.jobs.store import JobStore
from shared.infra.messaging.queueing import DELETE_DOCUMENT, ROUTES
from tests.gateway.helpers import (
    assert_error,
    enqueued,
    ingest,
    job_count,
    make_client,
    newest_message_headers,
    queue_lengths,
)


def test_json_batch_is_accepted_and_enqueued(api, alice, gw_redis):
    r = ingest(api, alice, "Marley was dead: to begin with.", "Scrooge knew he was dead?")
    assert r.status_code == 202, r.text
    body = r.json()
    assert body["status"] == "queued" and body["documents"] == 2 and body["new_documents"] == 2
    assert r.headers["Location"] == f"/v1/jobs/{body['job_id']}" == body["location"]
    assert queue_lengths(gw_redis)["chunker"] == 2
    job = api.get(r.headers["Location"], headers=alice["headers"])
    assert job.status_code == 200 and job.headers["Retry-After"]
    view = job.json()
    assert view["status"] == "queued" and view["kind"] == "ingest" and view["progress"]["documents"] == 2
    assert view["timestamps"]["created_at"] > 0 and view["usage"]["calls"] == 0
    # the same content again is deduplicated by content hash
    again = ingest(api, alice, "Marley was dead: to begin with.").json()
    assert again["new_documents"] == 0 and again["job_id"] != body["job_id"]


def test_upload_of_text_and_markdown_files(api, alice, gw_redis):
    files = [("files", ("a.txt", b"The ghost of Christmas past.", "text/plain")),
             ("files", ("b.md", "# Stave\n\nBah, humbug! \u2014 said Scrooge".encode(), "text/markdown"))]
    r = api.post("/v1/documents", files=files, headers=alice["headers"])
    assert r.status_code == 202, r.text
    assert r.json()["documents"] == 2 and queue_lengths(gw_redis)["chunker"] == 2
    titles = {d["title"] for d in api.get("/v1/documents", headers=alice["headers"]).json()["items"]}
    assert titles == {"a.txt", "b.md"}


BAD_JSON_BODIES = [
    (b'{"documents": [{"text": "unterminated', 400, "malformed_json"),
    (b'{"documents": [{"text": "caf\xe9"}]}', 400, "invalid_encoding"),
    (b'{"documents": []}', 422, "empty_batch"),
    (b'{"documents": [{"text": "   \\n\\t "}]}', 422, "empty_document"),
    (b'{"documents": [{"text": "ok"}, {"text": ""}], "atomic": true}', 422, "empty_document"),
    (b'{"documents": [{"text": "ok"}, {"text": ""}], "atomic": "maybe"}', 422, "validation_error"),
    (b'{"documents": [{"text": "lone \\ud800 surrogate"}]}', 422, "invalid_encoding"),
    (b'{"docs": [{"text": "x"}]}', 422, "validation_error"),
    (b'{"documents": [{"text": 5}]}', 422, "validation_error"),
    (b'{"documents": [{"text": "x", "id": "../../etc"}]}', 422, "validation_error"),
    (b'[1, 2]', 422, "validation_error"),
    (b'', 400, "malformed_json"),
]


@pytest.mark.parametrize("raw,status,code", BAD_JSON_BODIES)
def test_bad_json_input_is_rejected_and_nothing_is_enqueued(api, alice, gw_redis, raw, status, code):
    r = api.post("/v1/documents", content=raw, headers={**alice["headers"], "Content-Type": "application/json"})
    assert_error(r, status, code)
    assert enqueued(gw_redis) == 0 and job_count(gw_redis, "alice") == 0
    assert api.get("/v1/documents", headers=alice["headers"]).json()["total"] == 0


@pytest.mark.parametrize("files,status,code", [
    ([("files", ("x.pdf", b"MZ\x90\x00\x03\x00\x00\x00", "application/pdf"))], 415, "unsupported_file_type"),
    ([("files", ("x.txt", b"caf\xe9 au lait", "text/plain"))], 422, "invalid_encoding"),
    ([("files", ("x.txt", b"  \n ", "text/plain"))], 422, "empty_document"),
    ([("other", ("x.txt", b"hello", "text/plain"))], 422, "empty_batch"),
])
def test_bad_uploads_are_rejected_and_nothing_is_enqueued(api, alice, gw_redis, files, status, code):
    assert_error(api.post("/v1/documents", files=files, headers=alice["headers"]), status, code)
    assert enqueued(gw_redis) == 0 and job_count(gw_redis, "alice") == 0


def test_unsupported_media_type(api, alice, gw_redis):
    r = api.post("/v1/documents", content=b"text", headers={**alice["headers"], "Content-Type": "text/plain"})
    assert_error(r, 415, "unsupported_media_type")
    assert enqueued(gw_redis) == 0


def test_documents_over_the_configured_size_are_rejected(gw_env, gw_redis):
    gw_env.setenv("GRAPHFLEET_CHUNKING__MAX_DOCUMENT_BYTES", "1000")
    reset_settings_cache()
    from tests.gateway.helpers import new_tenant

    with make_client(max_body_bytes=4096) as client:
        who = new_tenant(client, "sizes")
        assert_error(ingest(client, who, "x" * 1001), 413, "document_too_large")
        big = json.dumps({"documents": [{"text": "y" * 5000}]}).encode()
        r = client.post("/v1/documents", content=big, headers={**who["headers"], "Content-Type": "application/json"})
        assert_error(r, 413, "body_too_large")

        def chunks():  # no Content-Length: cut off while streaming
            yield b'{"documents": [{"text": "'
            for _ in range(10):
                yield b"z" * 1000
            yield b'"}]}'

        r = client.post("/v1/documents", content=chunks(), headers={**who["headers"],
                                                                    "Content-Type": "application/json"})
        assert_error(r, 413, "body_too_large")
        assert enqueued(gw_redis) == 0 and job_count(gw_redis, "sizes") == 0
        assert ingest(client, who, "x" * 1000).status_code == 202


def test_idempotency_key_returns_the_same_job(api, alice, gw_redis):
    headers = {"Idempotency-Key": "batch-42"}
    first = ingest(api, alice, "one", "two", headers=headers)
    second = ingest(api, alice, "one", "two", headers=headers)
    assert first.status_code == second.status_code == 202
    assert first.json() == second.json() and second.headers["Location"] == first.headers["Location"]
    assert job_count(gw_redis, "alice") == 1 and queue_lengths(gw_redis)["chunker"] == 2
    assert_error(ingest(api, alice, "one", "three", headers=headers), 422, "idempotency_key_reused")
    assert job_count(gw_redis, "alice") == 1 and queue_lengths(gw_redis)["chunker"] == 2
    # a different key is a different submission
    assert ingest(api, alice, "one", "two", headers={"Idempotency-Key": "batch-43"}).json()["job_id"] != \
        first.json()["job_id"]


def test_list_get_and_paginate_documents(api, alice):
    api.post("/v1/documents", json={"documents": [{"text": f"document number {i}", "id": f"d{i}",
                                                   "title": f"T{i}", "metadata": {"n": str(i)}}
                                                  for i in range(5)]}, headers=alice["headers"])
    page = api.get("/v1/documents?offset=1&limit=2", headers=alice["headers"]).json()
    assert page["total"] == 5 and page["offset"] == 1 and page["limit"] == 2 and len(page["items"]) == 2
    everything = api.get("/v1/documents?limit=500", headers=alice["headers"]).json()["items"]
    assert {d["id"] for d in everything} == {f"d{i}" for i in range(5)}
    assert all(d["status"] == "pending" for d in everything)
    doc = api.get("/v1/documents/d3", headers=alice["headers"]).json()
    assert doc["title"] == "T3" and doc["metadata"] == {"n": "3"}
    assert_error(api.get("/v1/documents/missing", headers=alice["headers"]), 404, "not_found")
    assert_error(api.get("/v1/documents?limit=0", headers=alice["headers"]), 422, "validation_error")
    assert_error(api.get("/v1/documents?offset=-1", headers=alice["headers"]), 422, "validation_error")


def test_delete_creates_a_delete_job_and_enqueues_the_task(api, alice, gw_redis):
    ingest_job = api.post("/v1/documents", json={"documents": [{"text": "to be deleted", "id": "gone"}]},
                          headers=alice["headers"]).json()["job_id"]
    before = queue_lengths(gw_redis)
    r = api.delete("/v1/documents/gone", headers=alice["headers"])
    assert r.status_code == 202 and r.headers["Location"] == f"/v1/jobs/{r.json()['job_id']}"
    job_id = r.json()["job_id"]
    assert job_id != ingest_job
    jobs = JobStore(gw_redis, "alice")
    assert jobs.get_field(job_id, "kind") == "delete" and jobs.doc_ids(job_id) == ["gone"]
    queue = ROUTES.get(DELETE_DOCUMENT, "default")
    assert queue_lengths(gw_redis)[queue] == before[queue] + 1
    headers = newest_message_headers(gw_redis, queue)
    assert headers["task"] == "graphfleet.delete_document"
    assert ast.literal_eval(headers["kwargsrepr"]) == {"tenant": "alice", "job_id": job_id, "doc_id": "gone"}
    assert_error(api.delete("/v1/documents/never-was", headers=alice["headers"]), 404, "not_found")


def test_list_documents_filtered_by_status(api, alice, gw_redis):
    from shared.infra.store.redis_graph import GraphStore

    api.post("/v1/documents", json={"documents": [{"text": f"status document {i}", "id": f"s{i}"}
                                                  for i in range(4)]}, headers=alice["headers"])
    store = GraphStore(gw_redis, "alice")
    for doc_id, status in (("s1", "processed"), ("s3", "processed"), ("s2", "failed")):
        doc = store.document(doc_id)
        doc.status = status
        store.save_document(doc)
    page = api.get("/v1/documents?status=processed&limit=1", headers=alice["headers"]).json()
    assert page["total"] == 2 and [d["id"] for d in page["items"]] == ["s1"] and page["status"] == "processed"
    page = api.get("/v1/documents?status=processed&offset=1", headers=alice["headers"]).json()
    assert [d["id"] for d in page["items"]] == ["s3"]
    assert [d["id"] for d in api.get("/v1/documents?status=pending", headers=alice["headers"]).json()["items"]] \
        == ["s0"]
    assert api.get("/v1/documents", headers=alice["headers"]).json()["total"] == 4
    assert_error(api.get("/v1/documents?status=lost", headers=alice["headers"]), 422, "validation_error")
