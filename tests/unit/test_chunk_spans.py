"""A chunk's character span in its document (recorded when it is cut) and the pages of a span: read from the
document's page boundaries, not by searching for the chunk's text."""

from __future__ import annotations

import pytest

from shared.domain.chunking import chunk_by_separators, chunk_by_tokens
from shared.domain.documents import page_markers, page_spans, pages_in_span, pages_of

PAGES = [f"Ledger page {i}: the crates of rope and tar came ashore. " * 12 for i in range(1, 6)]


def test_a_span_names_the_pages_whose_text_it_covers():
    text = page_markers(["Harbour master logs ships.", "Kestrel Point lighthouse.", "Ferry timetable."])
    spans = page_spans(text)
    assert [p for p, _, _ in spans] == [1, 2, 3]
    assert [text[s:e] for _, s, e in spans] == ["Harbour master logs ships.", "Kestrel Point lighthouse.",
                                                 "Ferry timetable."]
    at = text.index("lighthouse")
    assert pages_in_span(spans, at, at + len("lighthouse")) == [2]  # one word of page 2
    assert pages_in_span(spans, text.index("logs"), text.index("Ferry") + 5) == [1, 2, 3]
    # the blank lines and the marker before page 2 are not page 2's text
    assert pages_in_span(spans, text.index("ships."), text.index("Kestrel")) == [1]
    assert pages_in_span(spans, text.index("[page 2]"), text.index("Kestrel")) == []
    assert page_spans("no markers here") == []


def test_repeated_text_gets_the_pages_of_its_own_place():
    text = page_markers(["Tide table.", "Other notes.", "Tide table."])
    spans = page_spans(text)
    second = text.rindex("Tide table.")
    assert pages_in_span(spans, second, second + len("Tide table.")) == [3]
    assert pages_of(text, "Tide table.") == [1]  # the text search finds the first copy only


@pytest.mark.parametrize("chunker", [chunk_by_tokens, chunk_by_separators])
def test_every_chunk_records_its_span_and_its_pages_follow_from_it(chunker):
    text = page_markers(PAGES)
    spans = page_spans(text)
    chunks = chunker(text, "doc-1", size=120, overlap=20)
    assert len(chunks) > 3
    for chunk in chunks:
        assert text[chunk.start:chunk.end] == chunk.text
        assert pages_in_span(spans, chunk.start, chunk.end) == pages_of(text, chunk.text)
    assert [c.start for c in chunks] == sorted(c.start for c in chunks)


def test_a_multi_byte_character_cut_by_a_token_window_still_gets_a_span():
    text = "Ålesund harbour 🚢 logs. " * 60
    for chunk in chunk_by_tokens(text, "doc-1", size=37, overlap=5):
        assert chunk.start is not None and 0 <= chunk.start < chunk.end <= len(text)


def test_the_chunk_stage_gives_a_repeated_passage_the_pages_of_its_own_place(redis_client, tenant):
    """Page 3 ends with the passage page 1 holds: the chunk cut from page 3 is cited as page 3 (a text search
    finds page 1's copy first), and the document keeps its page boundaries for the query's sentence pages."""
    from shared.config import get_settings
    from shared.domain.models import Document
    from shared.infra.jobs.store import JobStore
    from shared.infra.store.redis_graph import GraphStore
    from shared.pipeline.chunk_stage import run_chunk

    passage = ("Rope and tar came ashore.\n\nTide table kept by the harbour master, with the hours of every high and "
               "low water of the spring tides at Kestrel Point.")
    text = page_markers([passage, "Other notes.", " ".join(["Rope and tar came ashore."] * 11) + " " + passage])
    base = get_settings()
    cfg = base.model_copy(update={"chunking": base.chunking.model_copy(
        update={"size_tokens": 40, "overlap_tokens": 0, "by_separators": True})})
    store, jobs = GraphStore(redis_client, tenant), JobStore(redis_client, tenant)
    store.put_document(Document(id="d1", tenant=tenant), text)
    jobs.create("j1", "ingest", ["d1"])
    run_chunk(store, jobs, cfg, "j1", "d1")
    chunks = store.chunks(store.document("d1").chunk_ids).values()
    repeated = [c for c in chunks if c.text == passage]  # page 3's copy, cut as a chunk of its own
    assert repeated and repeated[0].start > text.index("[page 3]")
    assert repeated[0].pages == [3] and pages_of(text, repeated[0].text) == [1]
    assert store.document("d1").page_spans == page_spans(text)
