"""Page / section markers in extracted text, and the pages a chunk of that text spans.

A parser writes ``[page N]`` on its own line before each PDF page's text and ``[section TITLE]`` before a
heading's text, so the markers travel with the text into the chunks (a chunk's text says which page it
quotes) and :func:`pages_of` can tell the page of a chunk that starts in the middle of one."""

from __future__ import annotations

import re

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
