"""Pieces shared by the context builders: evidence and sources/citations, row shortening, text-unit
selection."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from pydantic import BaseModel, Field, PrivateAttr

from shared.domain.models import Chunk, Entity, Relation
from shared.domain.packing import csv_row
from shared.domain.query.budget import Section
from shared.domain.query.lazy import BatchedCounts
from shared.domain.query.params import QueryParam
from shared.domain.query.row_counts import has_static_counts, rest_counts, source_counts
from shared.domain.query.truncation import shorten, split_sentences
from shared.domain.retrieval.fusion import rrf
from shared.domain.tokens import count_tokens, count_tokens_batch, get_encoding, truncate_text


class Evidence(BaseModel):
    """One kept context item, in rank order: what an extractive answer quotes and a citation names."""

    kind: str  # entity | relation | report | chunk | point
    cite: str  # id as it appears in the context ("E3", "R1", "L0-2", chunk id)
    key: str  # entity name, "src->tgt", community id, chunk id
    text: str
    doc_ids: list[str] = Field(default_factory=list)
    chunk_ids: list[str] = Field(default_factory=list)
    pages: list[int] = Field(default_factory=list)  # a chunk of a paged document: the pages it quotes
    score: float = 0.0


class SentenceCitation(BaseModel):
    """One sentence of an extractive answer and where it came from: the context item it was quoted from
    (``cite``/``kind``/``key`` as in ``Evidence``), its document (id and name), its chunk, and the pages of the
    sentence's own character span in the document (``start``/``end``; None when unknown, then ``pages`` are the
    pages of the whole item it came from)."""

    text: str
    cite: str
    kind: str
    key: str
    doc_id: str = ""
    document_name: str = ""
    chunk_id: str | None = None
    pages: list[int] = Field(default_factory=list)
    start: int | None = None
    end: int | None = None


class Sources(BaseModel):
    entities: list[str] = Field(default_factory=list)
    relations: list[str] = Field(default_factory=list)
    reports: list[str] = Field(default_factory=list)
    chunks: list[str] = Field(default_factory=list)
    documents: list[str] = Field(default_factory=list)
    evidence: list[Evidence] = Field(default_factory=list)
    omitted_chunks: list[str] = Field(default_factory=list)  # candidate chunks the budget left out (map-reduce input)
    # chunk id -> the pages it quotes, for chunks of paged documents (PDF)
    pages: dict[str, list[int]] = Field(default_factory=dict)
    # document id -> its name as cited: the uploaded file name, or the JSON document's title (its id when none)
    document_names: dict[str, str] = Field(default_factory=dict)
    # an extractive answer (no LLM): each quoted sentence with the pages of its own span, in answer order
    sentences: list[SentenceCitation] = Field(default_factory=list)

    # list name -> (its length when last seen here, its items as a set): a hub entity's evidence names tens of
    # thousands of documents, and testing each against the list made adding them quadratic (22 s for 67,485)
    _seen: dict[str, tuple[int, set[str]]] = PrivateAttr(default_factory=dict)

    def add(self, ev: Evidence) -> None:
        self.evidence.append(ev)
        target = {"entity": "entities", "relation": "relations", "report": "reports", "chunk": "chunks"}.get(ev.kind)
        if target is not None:
            self._append_new(target, [ev.key])
        if ev.kind == "chunk" and ev.pages:
            self.pages[ev.key] = list(ev.pages)
        self._append_new("documents", [d for d in ev.doc_ids if d])

    def _append_new(self, name: str, items: list[str]) -> None:
        """Append to list ``name`` each of ``items`` it does not hold yet, in order."""
        if not items:
            return
        target: list[str] = getattr(self, name)
        length, seen = self._seen.get(name, (-1, set()))
        if length != len(target):  # new, or changed by someone else: read it again
            seen = set(target)
        for item in items:
            if item not in seen:
                seen.add(item)
                target.append(item)
        self._seen[name] = (len(target), seen)

    def citations(self) -> dict[str, str]:
        return {e.cite: e.key for e in self.evidence}


def cut_at_sentence(text: str, max_tokens: int, model: str | None) -> str:
    """The longest run of whole leading sentences within ``max_tokens``, or, when even the first sentence
    is longer, that sentence cut at a token boundary and marked with an ellipsis."""
    if count_tokens(text, model) <= max_tokens:
        return text
    kept = ""
    for sentence in split_sentences(text):
        candidate = f"{kept} {sentence}".strip()
        if count_tokens(candidate, model) > max_tokens:
            break
        kept = candidate
    if kept:
        return kept
    return (truncate_text(text, max(0, max_tokens - 1), model).rstrip() + "…") if max_tokens > 1 else ""


def row_shrinker(values: Callable[[int], Sequence], text_column: int, model: str | None,
                 on_shrink: Callable[[int, str], None] | None = None) -> Callable[[int, int], str | None]:
    """A Section ``shrink`` for graph rows: row ``i`` with its text cell cut at a sentence boundary so
    that the row fits ``room`` tokens (so a long first description never leaves its section empty)."""

    def shrink(i: int, room: int) -> str | None:
        cells = list(values(i))
        text = str(cells[text_column])
        cells[text_column] = ""
        target = room - count_tokens(csv_row(cells), model) - 2
        for _ in range(4):
            if target <= 0:
                return None
            cells[text_column] = cut_at_sentence(text, target, model)
            row = csv_row(cells)
            over = count_tokens(row, model) - room
            if cells[text_column] and over <= 0:
                if on_shrink is not None:
                    on_shrink(i, cells[text_column])
                return row
            target -= max(over, 1) + 2
        return None

    return shrink


def graph_row_tokens(cells: Sequence[Sequence], text_column: int, stored: Sequence[Entity | Relation], numeric: int,
                     model: str | None) -> Sequence[int] | None:
    """Tokens of each graph row (a Section's ``row_tokens``, without its line break) from the counts stored with the
    rows at ingestion (``stored[i]``: the Entity or Relation of ``cells[i]``; ``numeric``: its trailing numeric
    cells). A row with a count of its static part (``row_counts.rest_counts``) is counted exactly, and its line's
    count is left in the per-process memo for the allocator's exact check; a row with only its description's count
    (``text_tokens``, older data) is estimated from it (``_text_estimates``); a row with neither is counted whole.
    None when no row has a stored count: the allocator counts. Stored counts never make a context exceed its
    budget: the allocator checks the fit of the rendered section exactly, and a stored count is used only for the
    text it counted. Counted in batches as the allocator reads them (``lazy.BatchedCounts``): rows the budget never
    reaches are not rendered or counted."""
    encoding = get_encoding(model).name
    static = has_static_counts(stored, model)
    if not static and not any(encoding in row.text_tokens for row in stored):
        return None

    def estimate(start: int, stop: int) -> list[int]:
        exact, others = [], []
        for i in range(start, stop):
            (exact if static and encoding in stored[i].row_tokens else others).append(i)
        rests = rest_counts([cells[i] for i in exact], [stored[i] for i in exact], numeric, model)
        cites = count_tokens_batch([str(cells[i][0]) for i in exact], model)
        out = {i: cite + rest - 1 for i, cite, rest in zip(exact, cites, rests, strict=True)}  # -1: the line break
        out.update(zip(others, _text_estimates([cells[i] for i in others], text_column,
                                               [stored[i].text_tokens for i in others], encoding, model), strict=True))
        return [out[i] for i in range(start, stop)]

    return BatchedCounts(len(stored), estimate)


def _text_estimates(rows: Sequence[Sequence], text_column: int, stored: Sequence[dict[str, int]], encoding: str,
                    model: str | None) -> list[int]:
    """Tokens of each row from its text's stored count (``stored[i]``: encoding name -> count) and the rest of the
    row counted (a few short cells that recur from query to query); a row with no count for ``encoding`` is counted
    whole. An estimate only (the seams around the text are guessed): the allocator checks the fit exactly."""
    heads = [csv_row([*row[:text_column], "", *row[text_column + 1:]]) for row, counts in zip(rows, stored, strict=True)
             if encoding in counts]
    whole = [csv_row(row) for row, counts in zip(rows, stored, strict=True) if encoding not in counts]
    head_counts, whole_counts = iter(count_tokens_batch(heads, model)), iter(count_tokens_batch(whole, model))
    out = []
    for row, counts in zip(rows, stored, strict=True):
        if encoding not in counts:
            out.append(next(whole_counts))
            continue
        text = str(row[text_column])
        quoting = 2 + text.count('"') if any(c in text for c in ',"\n') else 0  # the quotes the CSV adds
        out.append(next(head_counts) + counts[encoding] + quoting + 1)  # +1: the merge at the seams
    return out


def rel_key(src: str, tgt: str) -> str:
    return f"{src}->{tgt}"


def fuse_chunk_rankings(
    direct: Sequence[tuple[str, float]], linked: Sequence[str], k: int = 60
) -> list[tuple[str, float]]:
    """Directly retrieved chunks (hybrid BM25+vector) interleaved with entity-linked chunks, direct
    first, duplicates dropped; the score is the RRF score of both lists (for display).

    Interleaving guarantees that any prefix of n sources holds the top ceil(n/2) direct hits, so a
    graph mode keeps what plain BM25 retrieval would put first, whatever the budget cuts."""
    scores = dict(rrf([list(direct), [(c, 0.0) for c in linked]], [1.0, 1.0], k))
    out: list[tuple[str, float]] = []
    seen: set[str] = set()
    d_ids = [c for c, _ in direct]
    for i in range(max(len(d_ids), len(linked))):
        for lst in (d_ids, linked):
            if i < len(lst) and lst[i] not in seen:
                seen.add(lst[i])
                out.append((lst[i], scores.get(lst[i], 0.0)))
    return out


def order_chunks(ranked: Sequence[tuple[str, float]], chunks: dict[str, Chunk], order: str,
                 model: str | None) -> list[tuple[Chunk, float]]:
    items = [(chunks[c], s) for c, s in ranked if c in chunks]
    if order == "shortest_first":
        counts = count_tokens_batch([c.text for c, _ in items], model)
        idx = sorted(range(len(items)), key=lambda i: (counts[i], i))
        items = [items[i] for i in idx]
    return items


def sources_section(
    items: Sequence[tuple[Chunk, float]], param: QueryParam, cap: int | None, title: str = "Sources"
) -> tuple[Section, list[Evidence]]:
    """Sources section with ``id,content`` rows (nano-graphrag's layout). The id is a short citation ("S3"),
    resolved to the chunk id and its document by ``Sources.citations()`` and the evidence: a chunk and a
    document hash cost ~40 tokens a row, a fifth of a 4,000-token context at 25 passages. The first
    chunk that does not fit can be shortened by the configured smart-truncation strategy
    (relevance or structure)."""
    model = param.model
    cites = [f"S{i}" for i in range(1, len(items) + 1)]
    rows = [csv_row([cite, c.text]) for cite, (c, _) in zip(cites, items, strict=True)]
    evidence = [
        Evidence(kind="chunk", cite=cite, key=c.id, text=c.text, doc_ids=[c.doc_id], chunk_ids=[c.id],
                 pages=c.pages, score=s)
        for cite, (c, s) in zip(cites, items, strict=True)
    ]

    def shrink(i: int, room: int) -> str | None:
        if param.source_truncation in ("none", "map_reduce") or i >= len(items):  # map-reduce: room for summaries
            return None
        chunk = items[i][0]
        overhead = count_tokens(csv_row([cites[i], ""]), model) + 2
        target = room - overhead
        for _ in range(4):
            if target <= 0:
                return None
            text = shorten(chunk.text, param.query, target, param.source_truncation, model)
            if not text:
                return None
            row = csv_row([cites[i], text])
            over = count_tokens(row, model) - room
            if over <= 0:
                evidence[i] = evidence[i].model_copy(update={"text": text})
                return row
            target -= over + 2
        return None

    fill = param.budget_split == "evidence"
    # rows are counted from their texts, which the per-process count cache knows from earlier queries (a row's
    # citation changes with its rank, its text does not), or ingestion stored with the chunk: citation + the rest
    # of the line, exactly as the allocator's check counts them (``line_counts``)
    bodies = source_counts([c for c, _ in items], model)
    heads = count_tokens_batch(cites, model)
    estimate = [b + h for b, h in zip(bodies, heads, strict=True)]
    return Section("sources", rows, title=title, header="id,content", cap=cap, shrink=shrink,
                   fill=fill, row_tokens=estimate), evidence


def linked_chunk_order(entity_order: Sequence[str], entity_sources: dict[str, list[str]],
                       neighbor_sources: dict[str, list[set[str]]]) -> list[str]:
    """nano-graphrag's text-unit order: by the rank of the entity that cites the chunk, then by how
    many one-hop neighbours also cite it (more = better)."""
    best: dict[str, tuple[int, int]] = {}
    for rank, name in enumerate(entity_order):
        neighbours = neighbor_sources.get(name, [])
        for cid in entity_sources.get(name, []):
            score = (rank, -sum(1 for srcs in neighbours if cid in srcs))
            if cid not in best or score < best[cid]:
                best[cid] = score
    return sorted(best, key=lambda c: best[c])
