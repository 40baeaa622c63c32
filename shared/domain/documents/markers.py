"""Page / section markers in extracted text, and the pages a chunk of that text spans.

A parser writes ``[page N]`` on its own line before each PDF page's text and ``[section TITLE]`` before a
heading's text, so the markers travel with the text into the chunks (a chunk's text says which page it
quotes). :func:`page_spans` records where each page's text lies in the document's text, and
:func:`pages_in_span` gives the pages a character span of it (a chunk, or one sentence of a chunk) covers;
:func:`pages_of` finds a chunk by its text, for chunks stored without their span."""

from __future__ import annotations

import re
from bisect import bisect_right

PAGE_RE = re.compile(r"^\[page (\d+)\]$", re.MULTILINE)


def page_markers(pages: list[str]) -> str:
    return "\n\n".join(f"[page {i}]\n{text.strip()}" for i, text in enumerate(pages, 1) if text.strip())


def section_marker(title: str) -> str:
    return f"[section {' '.join(title.split())[:200]}]"


def pages_of(doc_text: str, chunk_text: str) -> list[int]:
    """The pages ``chunk_text`` (a chunk of ``doc_text``) spans: the page open where it starts and every
    page marker inside it; [] when the document has no page markers or the chunk is not in it."""
    start = doc_text.find(chunk_text)
    if start < 0:
        return []
    inside = list(PAGE_RE.finditer(chunk_text))
    pages = [int(m.group(1)) for m in inside]
    if not inside or chunk_text[:inside[0].start()].strip():  # starts within the page opened before it
        before = PAGE_RE.findall(doc_text, 0, start)
        pages += [int(before[-1])] if before else []
    return sorted(set(pages))


def page_spans(doc_text: str) -> list[tuple[int, int, int]]:
    """Each page of a paged text as ``(page, start, end)``: the character span of its text (between its marker and
    the next one, without the whitespace around it), in document order; [] for a text without page markers."""
    marks = list(PAGE_RE.finditer(doc_text))
    spans = []
    for i, mark in enumerate(marks):
        stop = marks[i + 1].start() if i + 1 < len(marks) else len(doc_text)
        body = doc_text[mark.end():stop]
        start = mark.end() + len(body) - len(body.lstrip())
        end = mark.end() + len(body.rstrip())
        if end > start:
            spans.append((int(mark.group(1)), start, end))
    return spans


def pages_in_span(spans: list[tuple[int, int, int]], start: int, end: int) -> list[int]:
    """The pages whose text the character span ``[start, end)`` covers (``spans`` from :func:`page_spans`): a
    span holding only a page's marker or the blank lines around it does not cite that page."""
    pages = []
    for page, page_start, _ in spans[bisect_right(spans, start, key=lambda s: s[2]):]:
        if page_start >= end:
            break
        pages.append(page)
    return sorted(set(pages))
