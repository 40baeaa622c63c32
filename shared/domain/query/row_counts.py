"""Token counts of context rows stored at ingestion, so that a query's context is assembled without encoding its
rows again.

The allocator counts each row as its citation ("E3", "S12") plus the rest of its line (``line_rest``), memoized per
process (``line_tokens.line_counts``). A process that has not seen a row yet (the first queries after a start or an
ingestion, a large tenant's rows the warm-up does not count) would encode its rest: a 30,000-token context is
~30,000 tokens of encoding. Ingestion stores instead, with each row, the count of the text that stays the same:

* a chunk: its source row's rest (``source_body``), whole;
* an entity or a relation: its row's rest up to and including the comma before its numeric cells (``static_line``:
  degree; weight and rank, which change as the graph grows). The encoders whose split patterns the line rules are
  tested on (``SEAM_ENCODINGS``) never put a digit in a piece with anything but digits, so a rest whose numeric
  suffix starts with a digit counts exactly as its static part plus that suffix (tests/unit/test_stored_row_counts.py).

The counts read are put in the per-process memo (``tokens.count_tokens_known``): the allocator's exact fit check
finds them there and encodes only citation ids and numeric suffixes. So a stored count is used only for the very text
it counted: it is stored with a CRC-32 of that text and of the count (``row_digest``), checked when it is read, and a
row whose text was rewritten without its count, whose layout a later version changed, or whose count was written by
anything else, is counted as before (a context never exceeds its budget, and its reported count stays exact,
whatever the stored counts say).
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from typing import Protocol

from shared.domain.models import Chunk
from shared.domain.packing import csv_row
from shared.domain.query.line_tokens import SEAM_ENCODINGS, shared_cut
from shared.domain.tokens import count_tokens, count_tokens_batch, count_tokens_known, get_encoding

_DIGITS = frozenset("0123456789")


class Counted(Protocol):
    """A stored row with its counts (``Chunk``, ``Entity``, ``Relation``)."""

    row_tokens: dict[str, int]
    row_digest: int


def line_rest(cells: Sequence) -> str:
    """A row's line without its citation (the first cell), from its comma to its line break: the part of the row
    that the allocator counts apart from the citation (``shared.domain.query.line_tokens.line_counts``), the same
    whichever rank the row takes; the per-process count cache keeps it from query to query, and
    ``shared.infra.store.warmup`` counts a tenant's ahead."""
    return csv_row(["", *cells[1:]]) + "\n"


def source_body(text: str) -> str:
    """A source row's line without its citation (``line_rest``)."""
    return line_rest(["", text])


def static_line(cells: Sequence, numeric: int) -> str:
    """The start of a row's ``line_rest`` that is fixed when the row is written: every cell after the citation but
    the last ``numeric`` ones, with the comma that precedes those."""
    return csv_row(["", *cells[1:len(cells) - numeric], ""])


def row_digest(text: str, counts: dict[str, int]) -> int:
    """CRC-32 of ``text`` (its UTF-8 bytes) and of its ``counts`` (encoding name -> tokens), stored with them: a
    count is read only with the digest written with it, for the text it counted (microseconds a row)."""
    stamp = ",".join(f"{name}={n}" for name, n in sorted(counts.items())).encode()
    return zlib.crc32(stamp, zlib.crc32(text.encode("utf-8", "surrogatepass")))


def stored_counts(texts: Sequence[str], model: str | None) -> list[tuple[dict[str, int], int]]:
    """(``row_tokens``, ``row_digest``) of each text, to store with its row: its count under the query model's
    encoding, counted in one batch, and their digest."""
    encoding = get_encoding(model).name
    counts = [{encoding: n} for n in count_tokens_batch(texts, model)]
    return [(c, row_digest(text, c)) for text, c in zip(texts, counts, strict=True)]


def counts_after(text: str, before: str | None, row: Counted | None, model: str | None) -> tuple[dict[str, int], int]:
    """``stored_counts`` of ``text``, a row's static part rewritten from ``row`` (stored, its static part ``before``):
    a merge that folds new parts into a long description counts only what changed. Where the two texts share most
    of their length and ``row``'s count of ``before`` is its own (``known_count``), the count is the old one less the
    tokens of ``before`` after the last piece start they share (``line_tokens.shared_cut``) plus those of ``text``
    after it; otherwise ``text`` is counted whole."""
    enc = get_encoding(model)
    encoding = enc.name
    if before is not None and row is not None and encoding in SEAM_ENCODINGS:
        cut = shared_cut(before, text)
        old = known_count(before, row, encoding) if cut * 2 >= len(before) else None
        if old is not None:  # the tails are one-off texts: encoded directly, not put in the memo
            counts = {encoding: old - len(enc.encode_ordinary(before[cut:])) + len(enc.encode_ordinary(text[cut:]))}
            return counts, row_digest(text, counts)
    return stored_counts([text], model)[0]


def known_count(text: str, row: Counted, encoding: str) -> int | None:
    """``row``'s stored count of ``text`` under ``encoding``, or None when it has none, when its digest is not the
    one written with the counts for ``text`` (the text was rewritten, its layout changed, or the counts were
    written by something else), or when the count cannot be one of ``text`` (a token is one to a few bytes)."""
    n = row.row_tokens.get(encoding)
    if n is None or row_digest(text, row.row_tokens) != row.row_digest:
        return None
    return n if 0 < n <= len(text.encode("utf-8", "surrogatepass")) else None


def source_counts(chunks: Sequence[Chunk], model: str | None) -> list[int]:
    """Exact tokens of each chunk's source row without its citation (``source_body`` of ``chunk.text``): the
    memoized count, else the one stored at ingestion (remembered in the memo), else counted."""
    bodies = [source_body(c.text) for c in chunks]
    encoding = get_encoding(model).name
    return count_tokens_known(bodies, lambda i: known_count(bodies[i], chunks[i], encoding), model)


def rest_counts(cells: Sequence[Sequence], rows: Sequence[Counted], numeric: int, model: str | None) -> list[int]:
    """Exact tokens of each graph row's ``line_rest`` (``cells[i]`` rendered, ``rows[i]`` the stored row with its
    count of ``static_line``): the memoized count, else the stored count of its static part plus its numeric
    suffix's count (a few characters that recur), remembered in the memo, else counted. A suffix that does not start
    with a digit (a negative number) is not covered by the rule, and another encoding's pattern is not tested: both
    are counted whole."""
    rests = [line_rest(c) for c in cells]
    encoding = get_encoding(model).name

    def known(i: int) -> int | None:
        if encoding not in SEAM_ENCODINGS or encoding not in rows[i].row_tokens:
            return None
        static, rest = static_line(cells[i], numeric), rests[i]
        if not rest.startswith(static) or rest[len(static):len(static) + 1] not in _DIGITS:
            return None
        n = known_count(static, rows[i], encoding)
        return None if n is None else n + count_tokens(rest[len(static):], model)

    return count_tokens_known(rests, known, model)


def has_static_counts(rows: Sequence[Counted], model: str | None) -> bool:
    """Whether any of ``rows`` has a stored count that ``rest_counts`` can use under ``model``'s encoding."""
    encoding = get_encoding(model).name
    return encoding in SEAM_ENCODINGS and any(encoding in r.row_tokens for r in rows)
