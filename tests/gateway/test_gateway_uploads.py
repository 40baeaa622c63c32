"""Uploads of PDF, HTML and DOCX files at the gateway: the type comes from the bytes, not the name; the file is
stored as sent and a parse task is queued (the text is extracted by a worker, never in the gateway)."""

from __future__ import annotations

import pytest

from shared.config import reset_settings_cache
from shared.domain.documents.detect import DOCX, PDF
from shared.infra.jobs.store import JobStore
from shared.infra.store.redis_graph import GraphStore
from tests import document_files as files
from tests.gateway.helpers import assert_error, enqueued, job_count, make_client, new_tenant, queue_lengths


def _upload(api, who, *named: tuple[str, bytes], atomic: bool = False):
    return api.post("/v1/documents", files=[("files", (n, d, "application/octet-stream")) for n, d in named],
                    data={"atomic": "true"} if atomic else None, headers=who["headers"])


def test_files_are_stored_as_sent_and_queued_for_the_parser_texts_for_the_chunker(api, alice, gw_redis):
    pdf, docx = files.pdf(["Page one."]), files.docx(["A paragraph."])
    r = _upload(api, alice, ("a.pdf", pdf), ("b.docx", docx), ("c.html", files.html_page("News.")),
                ("d.md", b"# Notes\nplain text"))
    assert r.status_code == 202, r.text
    assert queue_lengths(gw_redis)["parser"] == 3 and queue_lengths(gw_redis)["chunker"] == 1
    store, jobs = GraphStore(gw_redis, alice["id"]), JobStore(gw_redis, alice["id"])
    docs = {d.title: d for d in store.documents(store.list_document_ids()).values()}
    assert store.original(docs["a.pdf"].id) == pdf and docs["a.pdf"].metadata["media_type"] == PDF
    assert store.document_text(docs["a.pdf"].id) is None  # not parsed in the gateway
    assert store.document_text(docs["d.md"].id) == "# Notes\nplain text" and store.original(docs["d.md"].id) is None
    snap = jobs.snapshot(r.json()["job_id"])
    assert snap.docs_files == {docs[t].id for t in ("a.pdf", "b.docx", "c.html")}  # a text has nothing to parse
    assert snap.docs_parsed == set()


def test_the_content_decides_the_type_not_the_extension(api, alice, gw_redis):
    r = _upload(api, alice, ("looks-like-text.txt", files.docx(["Really a DOCX."])))
    assert r.status_code == 202, r.text
    store = GraphStore(gw_redis, alice["id"])
    (doc,) = store.documents(store.list_document_ids()).values()
    assert doc.metadata["media_type"] == DOCX and queue_lengths(gw_redis)["parser"] == 1


@pytest.mark.parametrize("name,data,status,code", [
    ("report.pdf", b"MZ\x90\x00\x03\x00\x00\x00\x04\x00\x00\x00\xff\xff", 415, "unsupported_file_type"),  # an exe
    ("report.pdf", b"just some text pretending", 415, "unsupported_file_type"),  # text renamed .pdf
    ("report.docx", files.pdf(["a PDF renamed .docx"]), 415, "unsupported_file_type"),
    ("page.html", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00", 415, "unsupported_file_type"),
    ("photo.txt", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00", 422, "invalid_encoding"),  # named text
], ids=["exe-as-pdf", "text-as-pdf", "pdf-as-docx", "png-as-html", "png-as-txt"])
def test_a_file_whose_name_lies_is_refused_and_nothing_is_stored(api, alice, gw_redis, name, data, status, code):
    body = assert_error(_upload(api, alice, ("ok.md", b"fine"), (name, data), atomic=True), status, code)
    assert name in body["error"]["message"]
    assert [(r["name"], r["code"]) for r in body["error"]["refused"]] == [(name, code)]
    assert enqueued(gw_redis) == 0 and job_count(gw_redis, alice["id"]) == 0
    assert GraphStore(gw_redis, alice["id"]).document_count() == 0


@pytest.mark.parametrize("name,data,code", [
    ("report.pdf", b"MZ\x90\x00\x03\x00\x00\x00\x04\x00\x00\x00\xff\xff", "unsupported_file_type"),
    ("photo.txt", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00", "invalid_encoding"),
    ("empty.txt", b"", "empty_document"),
], ids=["exe-as-pdf", "png-as-txt", "empty"])
def test_without_atomic_the_lying_file_is_refused_by_name_and_the_rest_ingested(api, alice, gw_redis, name, data,
                                                                                code):
    r = _upload(api, alice, ("ok.md", b"fine"), (name, data))
    assert r.status_code == 202, r.text
    assert [(x["name"], x["code"]) for x in r.json()["refused"]] == [(name, code)]
    failures = api.get(r.json()["location"], headers=alice["headers"]).json()["failures"]
    assert [(f["name"], f["stage"], f["code"]) for f in failures] == [(name, "validate", code)]
    assert failures[0]["cause"].startswith(f"{name}: ")
    store = GraphStore(gw_redis, alice["id"])
    assert [d.title for d in store.documents(store.list_document_ids()).values()] == ["ok.md"]


def test_a_file_over_the_original_size_limit_is_413(gw_env, gw_redis):
    gw_env.setenv("GRAPHFLEET_CHUNKING__MAX_ORIGINAL_BYTES", "2000")
    reset_settings_cache()
    with make_client() as api:
        bob = new_tenant(api, "bob")
        big = files.pdf([" ".join(f"w{i * 7919 % 100003}" for i in range(2000))])  # words deflate poorly
        assert len(big) > 2000
        assert_error(_upload(api, bob, ("big.pdf", big)), 413, "document_too_large")
        assert enqueued(gw_redis) == 0
        assert _upload(api, bob, ("small.pdf", files.pdf(["small"]))).status_code == 202
