"""PDF, HTML and DOCX files end to end: uploaded through the real gateway (uvicorn subprocess), parsed by the
``parser`` queue's worker, chunked, extracted and queried by real Celery workers; the LLM is the simulator.
A bad file in the batch is a failed document with its cause; the other documents go on."""

from __future__ import annotations

import pytest

from shared.domain.documents import pages_of
from shared.infra.store.redis_graph import GraphStore
from tests import document_files as files

pytestmark = pytest.mark.integration

PAGE_TWO = "Velmora Thistlewick repaired the Kestrel Point lighthouse lens in the spring of 1911."


@pytest.fixture(scope="module")
def batch(live):
    """One upload: a two-page PDF, a DOCX, an HTML page, a Markdown file, and two bad files."""
    api = live.new_tenant("formats")
    uploads = {
        "harbour.pdf": files.pdf(["The Kestrel Point harbour office keeps the ledgers of every ship.", PAGE_TWO]),
        "minutes.docx": files.docx(["Orrin Maplethorpe chaired the Lantern Guild meeting in Dunmere."],
                                   heading="Lantern Guild minutes"),
        "news.html": files.html_page("Quillon Ashgrove opened the Dunmere ferry museum on Monday."),
        "notes.md": b"# Notes\nBrisa Fenwhistle sails the ferry Gannet between Dunmere and Kestrel Point.\n",
        "secret.pdf": files.encrypted_pdf(),
        "scan.pdf": files.scanned_pdf(),
    }
    r = api.post("/v1/documents", files=[("files", (name, data, "application/octet-stream"))
                                         for name, data in uploads.items()])
    assert r.status_code == 202, r.text
    view = api.wait_job(r.json()["job_id"])
    docs = {d["title"]: d for d in api.get("/v1/documents").json()["items"]}
    return {"api": api, "view": view, "docs": docs, "store": GraphStore(live.redis, api.id)}


def test_every_format_is_parsed_chunked_and_extracted(batch):
    view, docs, store = batch["view"], batch["docs"], batch["store"]
    assert view["status"] == "succeeded", view
    for title, phrase in [("harbour.pdf", "lighthouse lens"), ("minutes.docx", "Lantern Guild meeting"),
                          ("news.html", "Dunmere ferry museum"), ("notes.md", "ferry Gannet")]:
        doc = store.document(docs[title]["id"])
        assert doc.chunk_ids, title
        assert any(phrase in c.text for c in store.chunks(doc.chunk_ids).values()), title
    html_text = store.document_text(docs["news.html"]["id"])
    assert "ADVERT-TEXT" not in html_text and "NAV-MENU-TEXT" not in html_text and "TRACKING" not in html_text
    assert store.original(docs["harbour.pdf"]["id"]).startswith(b"%PDF-")  # the file is kept as sent


def test_bad_files_are_failed_documents_with_their_cause_and_nothing_else_is_lost(batch):
    view, docs, store = batch["view"], batch["docs"], batch["store"]
    failed = {f["doc_id"]: f["cause"] for f in view["failures"] if f.get("stage") == "parse"}
    assert failed == {docs["secret.pdf"]["id"]: failed[docs["secret.pdf"]["id"]],
                      docs["scan.pdf"]["id"]: failed[docs["scan.pdf"]["id"]]}
    assert failed[docs["secret.pdf"]["id"]].startswith("encrypted_pdf:")
    assert failed[docs["scan.pdf"]["id"]].startswith("no_text_layer:")
    for title in ("secret.pdf", "scan.pdf"):
        doc = store.document(docs[title]["id"])
        assert doc.status == "failed" and doc.error and not doc.chunk_ids
    assert view["progress"]["documents"] == 6 and view["progress"]["documents_chunked"] == 6


def test_a_query_finds_the_pdf_text_and_its_page(batch):
    api, docs, store = batch["api"], batch["docs"], batch["store"]
    result = api.query(mode="naive", query="Who repaired the Kestrel Point lighthouse lens?")
    assert result["status"] == "succeeded", result
    pdf_id = docs["harbour.pdf"]["id"]
    assert pdf_id in result["sources"]["documents"]
    pdf_text = store.document_text(pdf_id)
    cited = [c for c in store.chunks(result["sources"]["chunks"]).values() if c.doc_id == pdf_id]
    assert cited and any("lighthouse lens" in c.text and 2 in pages_of(pdf_text, c.text) for c in cited)
    assert "[page 2]" in "".join(c.text for c in cited)  # the citation's page travels in the chunk text
    # and as a field: the result's sources name each cited PDF chunk's pages ("harbour.pdf, page 2")
    pages = result["sources"]["pages"]
    assert all(pages[c.id] == pages_of(pdf_text, c.text) == c.pages for c in cited)
    assert any(2 in pages[c.id] for c in cited if "lighthouse lens" in c.text)


def test_graphfleet_ingest_of_a_directory_takes_its_pdf_html_and_docx_files(live, tmp_path):
    from graphfleet_cli.local_client import LocalClient, collect_files

    (tmp_path / "a.pdf").write_bytes(files.pdf(["Tamsin Oakhurst keeps the Dunmere tide tables."]))
    (tmp_path / "b.docx").write_bytes(files.docx(["Tamsin Oakhurst rings the harbour bell at noon."]))
    (tmp_path / "c.htm").write_bytes(files.html_page("Tamsin Oakhurst retired in 1920."))
    (tmp_path / "skip.png").write_bytes(b"\x89PNG\r\n\x1a\n")
    client = LocalClient(live.stack.redis_url)
    found = collect_files([str(tmp_path)])
    assert sorted(p.name for p in found) == ["a.pdf", "b.docx", "c.htm"]
    job = client.ingest_files("formats-cli", found)
    view = client.wait("formats-cli", job["job_id"], timeout=600)
    assert view["status"] == "succeeded" and not view["failures"], view
    store = GraphStore(client.redis, "formats-cli")
    texts = [store.document_text(d) for d in store.list_document_ids()]
    assert len(texts) == 3 and all("Tamsin Oakhurst" in t for t in texts)


def test_entity_and_relation_evidence_of_a_pdf_names_its_pages(batch):
    api, docs = batch["api"], batch["docs"]
    result = api.query(mode="local", query="Who repaired the Kestrel Point lighthouse lens?")
    assert result["status"] == "succeeded", result
    pdf_id = docs["harbour.pdf"]["id"]
    graph_rows = [ev for ev in result["sources"]["evidence"]
                  if ev["kind"] in ("entity", "relation") and pdf_id in ev["doc_ids"]]
    assert graph_rows, result["sources"]["evidence"]
    assert all(ev["pages"] for ev in graph_rows), graph_rows
    assert any(2 in ev["pages"] for ev in graph_rows if "Velmora" in ev["text"]), graph_rows
    assert result["sources"]["document_names"][pdf_id] == "harbour.pdf"  # the file name beside its id
