"""Token-window and separator-aware chunking. Chunk ids are content hashes. Each chunk records its character span
in the document's text (``start``/``end``), so its pages, and the pages of a sentence inside it, are read from the
document's page boundaries rather than by searching for its text."""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

import numpy as np

from shared.domain.ids import chunk_id_for
from shared.domain.models import Chunk
from shared.domain.tokens import get_encoding


def chunk_by_tokens(
    text: str, doc_id: str, size: int = 1200, overlap: int = 100, model: str | None = None
) -> list[Chunk]:
    """Fixed token windows of ``size`` with ``overlap`` tokens shared between neighbours."""
    if overlap >= size:
        raise ValueError(f"overlap ({overlap}) must be smaller than chunk size ({size})")
    enc = get_encoding(model)
    tokens = enc.encode_ordinary(text)
    step = size - overlap
    starts = list(range(0, max(len(tokens) - overlap, 1), step))
    windows = [tokens[start : start + size] for start in starts]
    texts = enc.decode_batch(windows)
    return _make_chunks(texts, [len(w) for w in windows], doc_id, _window_spans(text, tokens, starts, size, enc))


def _window_spans(text: str, tokens: list[int], starts: list[int], size: int, enc) -> list[tuple[int, int] | None]:
    """The character span in ``text`` of each token window: the byte lengths of the tokens (a table per
    encoding) place each window edge, and a byte offset becomes a character offset by decoding the text between
    edges (an edge inside a multi-byte character moves to that character's start). No spans when the tokens do
    not add up to ``text``."""
    ends = np.cumsum(_byte_lengths(enc)[np.asarray(tokens, dtype=np.int64)]) if tokens else np.zeros(0, np.int64)
    raw = text.encode("utf-8")
    if (int(ends[-1]) if len(ends) else 0) != len(raw):
        return [None] * len(starts)
    edges = sorted({0, len(tokens), *starts, *(min(s + size, len(tokens)) for s in starts)})
    chars: dict[int, int] = {}
    counted = at_char = 0  # bytes already counted as characters, and their characters
    for edge in edges:
        end = int(ends[edge - 1]) if edge else 0
        while end < len(raw) and raw[end] & 0xC0 == 0x80:  # a continuation byte: back to its character's start
            end -= 1
        if end > counted:
            at_char += end - counted if len(raw) == len(text) else len(raw[counted:end].decode("utf-8"))
            counted = end
        chars[edge] = at_char
    return [(chars[s], chars[min(s + size, len(tokens))]) for s in starts]


@lru_cache(maxsize=4)
def _byte_lengths(enc) -> np.ndarray:
    """Bytes of each token of ``enc``, indexed by token id (0 for ids the encoding does not use)."""
    table = np.zeros(enc.n_vocab, dtype=np.int64)
    for token in range(enc.n_vocab):
        try:
            table[token] = len(enc.decode_single_token_bytes(token))
        except KeyError:
            continue
    return table


def chunk_by_separators(
    text: str,
    doc_id: str,
    size: int = 1200,
    overlap: int = 100,
    separators: Sequence[str] = ("\n\n", "\n", ". ", " "),
    model: str | None = None,
) -> list[Chunk]:
    """Split on the coarsest separator first, pack pieces up to ``size`` tokens, carry overlap.

    Pieces still larger than ``size`` fall back to token windows.
    """
    enc = get_encoding(model)
    pieces = _split_recursive(text, list(separators), size, enc)
    counts = [len(t) for t in enc.encode_ordinary_batch(pieces)] if pieces else []
    packed: list[tuple[str, tuple[int, int] | None]] = []
    current: list[_Piece] = []
    current_tokens = 0
    for piece, n, at in zip(pieces, counts, _piece_offsets(text, pieces), strict=True):
        if current and current_tokens + n > size:
            packed.append(_joined(current))
            current, current_tokens = _tail_overlap(current, overlap)
        current.append((piece, n, at))
        current_tokens += n
    if current:
        packed.append(_joined(current))
    packed = [(t, span) for t, span in packed if t.strip()]
    out_texts = [t for t, _ in packed]
    token_counts = [len(t) for t in enc.encode_ordinary_batch(out_texts)] if out_texts else []
    return _make_chunks(out_texts, token_counts, doc_id, [span for _, span in packed])


_Piece = tuple[str, int, int | None]  # text, tokens, character offset in the document (None: not found)


def _piece_offsets(text: str, pieces: list[str]) -> list[int | None]:
    """Where each piece starts in ``text``: pieces are consecutive slices of it, except a piece re-decoded from
    token windows that no longer matches the text exactly (then None, and the next pieces are looked for after)."""
    offsets: list[int | None] = []
    pos = 0
    for piece in pieces:
        at = pos if text.startswith(piece, pos) else text.find(piece, pos)
        offsets.append(at if at >= 0 else None)
        if at >= 0:
            pos = at + len(piece)
    return offsets


def _joined(pieces: list[_Piece]) -> tuple[str, tuple[int, int] | None]:
    first, last = pieces[0][2], pieces[-1][2]
    span = (first, last + len(pieces[-1][0])) if first is not None and last is not None else None
    return "".join(p for p, _, _ in pieces), span


def _tail_overlap(pieces: list[_Piece], overlap: int) -> tuple[list[_Piece], int]:
    kept: list[_Piece] = []
    total = 0
    for piece in reversed(pieces):
        if total + piece[1] > overlap:
            break
        kept.insert(0, piece)
        total += piece[1]
    return kept, total


def _split_recursive(text: str, separators: list[str], size: int, enc) -> list[str]:
    if not text:
        return []
    if len(enc.encode_ordinary(text)) <= size:
        return [text]
    if not separators:
        tokens = enc.encode_ordinary(text)
        return enc.decode_batch([tokens[i : i + size] for i in range(0, len(tokens), size)])
    sep, rest = separators[0], separators[1:]
    parts = text.split(sep)
    pieces: list[str] = []
    for i, part in enumerate(parts):
        segment = part + (sep if i < len(parts) - 1 else "")
        if not segment:
            continue
        pieces.extend(_split_recursive(segment, rest, size, enc))
    return pieces


def _make_chunks(texts: list[str], token_counts: list[int], doc_id: str,
                 spans: list[tuple[int, int] | None]) -> list[Chunk]:
    chunks = []
    for index, (chunk_text, n, span) in enumerate(zip(texts, token_counts, spans, strict=True)):
        if not chunk_text.strip():
            continue
        start, end = span if span is not None else (None, None)
        chunks.append(Chunk(id=chunk_id_for(chunk_text), doc_id=doc_id, index=index, text=chunk_text, tokens=n,
                            start=start, end=end))
    return chunks


def chunk_document(text: str, doc_id: str, settings, model: str | None = None) -> list[Chunk]:
    """Chunk with the configured strategy (``settings`` is a ``ChunkingSettings``)."""
    if settings.by_separators:
        return chunk_by_separators(
            text, doc_id, settings.size_tokens, settings.overlap_tokens, settings.separators, model
        )
    return chunk_by_tokens(text, doc_id, settings.size_tokens, settings.overlap_tokens, model)
