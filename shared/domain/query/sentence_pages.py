"""The pages of each sentence an extractive answer quotes: the sentence's offset in its chunk plus the chunk's
start is its character span in the document (the lines it was quoted from, line breaks included), and the
document's page boundaries give the pages of that span, so a fact on page 9 of a chunk spanning pages 7-10 is
cited as page 9. A sentence of an entity's or relation's description is placed in the first of its source chunks
that quotes it (its words in order, whatever the line breaks between them)."""

from __future__ import annotations

import re
from collections.abc import Mapping

from shared.domain.documents.markers import pages_in_span
from shared.domain.models import Chunk, Document
from shared.domain.query.context_common import SentenceCitation
from shared.domain.query.extractive import Fact


def sentence_citations(facts: list[Fact], reader, docs: Mapping[str, Document],
                       names: Mapping[str, str]) -> list[SentenceCitation]:
    """One citation per quoted sentence, in answer order (the quoted chunks are read in one batch)."""
    chunk_ids = sorted({c for f in facts for c in _source_chunks(f)})
    chunks = reader.chunks(chunk_ids) if chunk_ids else {}
    return [_citation(f, _placed(f, chunks), docs, names) for f in facts]


def _source_chunks(fact: Fact) -> list[str]:
    return [fact.evidence.key] if fact.evidence.kind == "chunk" else list(fact.evidence.chunk_ids)


def _placed(fact: Fact, chunks: Mapping[str, Chunk]) -> tuple[Chunk, tuple[int, int]] | None:
    """The chunk the sentence is quoted from and the sentence's span in its document, when known."""
    for cid in _source_chunks(fact):
        chunk = chunks.get(cid)
        span = sentence_span(fact, chunk)
        if chunk is not None and span is not None:
            return chunk, span
    return None


def sentence_span(fact: Fact, chunk: Chunk | None) -> tuple[int, int] | None:
    """The sentence's character span in its document: None when its chunk has no recorded span (older data) or
    the sentence is not in the chunk's text."""
    if chunk is None or chunk.start is None:
        return None
    # a chunk's evidence text is the chunk's own unless the budget shortened it; otherwise (shortened, or an
    # entity's description) the sentence is looked for in the chunk's text, whatever whitespace (line breaks)
    # its words have there
    if fact.evidence.text == chunk.text:
        return chunk.start + fact.offset, chunk.start + fact.end
    found = re.search(r"\s+".join(map(re.escape, fact.text.split())), chunk.text)
    if found is None:
        return None
    return chunk.start + found.start(), chunk.start + found.end()


def _citation(fact: Fact, placed: tuple[Chunk, tuple[int, int]] | None, docs: Mapping[str, Document],
              names: Mapping[str, str]) -> SentenceCitation:
    ev = fact.evidence
    chunk, span = placed if placed is not None else (None, None)
    doc_id = chunk.doc_id if chunk is not None else (ev.doc_ids[0] if ev.doc_ids else "")
    doc = docs.get(doc_id)
    pages = list(ev.pages)  # the whole item's pages, unless the sentence's own span says better
    if span is not None and doc is not None and doc.page_spans:
        pages = pages_in_span(doc.page_spans, *span) or pages
    return SentenceCitation(text=fact.text, cite=ev.cite, kind=ev.kind, key=ev.key, doc_id=doc_id,
                            document_name=names.get(doc_id, doc_id), chunk_id=chunk.id if chunk else None,
                            pages=pages, start=span[0] if span else None, end=span[1] if span else None)
