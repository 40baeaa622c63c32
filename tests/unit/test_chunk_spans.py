"""A chunk's character span in its document (recorded when it is cut) and the pages of a span: read from the
document's page boundaries, not by searching for the chunk's text."""

from __future__ import annotations

import pytest

from shared.domain.chunking import chunk_by_separators, chunk_by_tokens
from shared.domain.parsing import page_markers, page_spans, pages_in_span, pages_of

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
