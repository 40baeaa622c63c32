"""Hostile files uploaded through the gateway (in process, real Redis), then parsed by the parse stage exactly as
the ``parser`` worker's task does (``run_parse`` + ``Flow.document_parsed``): each bad file is a failed document
with its cause, bounded in memory and time by construction (sizes checked before inflating or parsing), and the
good documents of the same batch go on to the chunker."""

from __future__ import annotations

from shared.config import get_settings, reset_settings_cache
from shared.infra.jobs.store import JobStore
from shared.infra.messaging.messages import ChunkDocument
from shared.infra.store.redis_graph import GraphStore
from shared.pipeline.flow import Flow
from shared.pipeline.parse_stage import run_parse
from tests import document_files as files
from tests.gateway.helpers import make_client, new_tenant

ARTICLE = "The night ferry to Dunmere now leaves at ten."


def test_a_batch_of_hostile_files_fails_each_bad_one_and_keeps_the_rest(gw_env, gw_redis):
    gw_env.setenv("GRAPHFLEET_CHUNKING__MAX_ORIGINAL_BYTES", "60000000")
    gw_env.setenv("GRAPHFLEET_GATEWAY_MAX_BODY_BYTES", "80000000")
    reset_settings_cache()
    scripts_page = (f"<!DOCTYPE html><html><body><article><p>{ARTICLE}</p></article>".encode()
                    + b"<script>" + b"var tracker = 1;" * 3_200_000 + b"</script></body></html>")
    assert len(scripts_page) > 50_000_000
    uploads = {
        "bomb.docx": files.zip_bomb_docx(),  # a valid DOCX to the gateway; inflates ~1000-fold
        "scripts.html": scripts_page,
        "secret.pdf": files.encrypted_pdf(),
        "scan.pdf": files.scanned_pdf(),
        "pdf-named.txt": files.pdf(["A PDF whose name says text."]),  # the name lies; read as a PDF
        "good.docx": files.docx(["The harbour opens at dawn."]),
    }
    with make_client() as api:
        who = new_tenant(api, "hostile")
        r = api.post("/v1/documents", files=[("files", (n, d, "application/octet-stream")) for n, d in uploads.items()],
                     headers=who["headers"])
        assert r.status_code == 202, r.text
    job_id, settings = r.json()["job_id"], get_settings()
    store, jobs = GraphStore(gw_redis, who["id"]), JobStore(gw_redis, who["id"])
    by_title = {d.title: d.id for d in store.documents(store.list_document_ids()).values()}
    sent = {}
    for title, doc_id in by_title.items():  # what the parse task body does, one delivery per document
        cause = run_parse(store, settings, doc_id)
        sent[title] = Flow(jobs, who["id"], job_id, f"task-{title}").document_parsed(doc_id, cause)

    failures = {title: jobs.document_failures(job_id).get(doc_id, "") for title, doc_id in by_title.items()}
    assert failures["bomb.docx"].startswith("zip_bomb:")
    assert failures["secret.pdf"].startswith("encrypted_pdf:")
    assert failures["scan.pdf"].startswith("no_text_layer:")
    for title in ("bomb.docx", "secret.pdf", "scan.pdf"):
        doc = store.document(by_title[title])
        assert doc.status == "failed" and doc.error == failures[title] and store.document_text(doc.id) is None
        assert not any(isinstance(m, ChunkDocument) for m in sent[title])
    for title in ("scripts.html", "pdf-named.txt", "good.docx"):
        assert failures[title] == "" and sent[title] == [ChunkDocument(who["id"], job_id, by_title[title])]
    assert store.document_text(by_title["scripts.html"]) == ARTICLE  # 50 MB of scripts: cut, not parsed
    assert "[page 1]" in store.document_text(by_title["pdf-named.txt"])
    snap = jobs.snapshot(job_id)
    assert snap.docs_parsed == set(by_title.values())
    assert snap.docs_done == {by_title[t] for t in ("bomb.docx", "secret.pdf", "scan.pdf")}  # nothing to chunk
