"""Token-window and separator-aware chunking. Chunk ids are content hashes."""

from __future__ import annotations

from collections.abc import Sequence

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
    windows = [tokens[start : start + size] for start in range(0, max(len(tokens) - overlap, 1), step)]
    texts = enc.decode_batch(windows)
    return _make_chunks(texts, [len(w) for w in windows], doc_id)


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
    out_texts: list[str] = []
    current: list[tuple[str, int]] = []
    current_tokens = 0
    for piece, n in zip(pieces, counts, strict=True):
        if current and current_tokens + n > size:
            out_texts.append("".join(p for p, _ in current))
            current, current_tokens = _tail_overlap(current, overlap)
        current.append((piece, n))
        current_tokens += n
    if current:
        out_texts.append("".join(p for p, _ in current))
    out_texts = [t for t in out_texts if t.strip()]
    token_counts = [len(t) for t in enc.encode_ordinary_batch(out_texts)] if out_texts else []
    return _make_chunks(out_texts, token_counts, doc_id)


def _tail_overlap(pieces: list[tuple[str, int]], overlap: int) -> tuple[list[tuple[str, int]], int]:
    kept: list[tuple[str, int]] = []
    total = 0
    for piece, n in reversed(pieces):
        if total + n > overlap:
            break
        kept.insert(0, (piece, n))
        total += n
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


def _make_chunks(texts: list[str], token_counts: list[int], doc_id: str) -> list[Chunk]:
    chunks = []
    for index, (chunk_text, n) in enumerate(zip(texts, token_counts, strict=True)):
        if not chunk_text.strip():
            continue
        chunks.append(
            Chunk(id=chunk_id_for(chunk_text), doc_id=doc_id, index=index, text=chunk_text, tokens=n)
        )
    return chunks


def chunk_document(text: str, doc_id: str, settings, model: str | None = None) -> list[Chunk]:
    """Chunk with the configured strategy (``settings`` is a ``ChunkingSettings``)."""
    if settings.by_separators:
        return chunk_by_separators(
            text, doc_id, settings.size_tokens, settings.overlap_tokens, settings.separators, model
        )
    return chunk_by_tokens(text, doc_id, settings.size_tokens, settings.overlap_tokens, model)
