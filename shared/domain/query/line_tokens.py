"""Exact token counts of rendered context text from memoized counts of its parts, without encoding it again.

An encoder (o200k, cl100k) splits text into pieces by its pattern and merges tokens only within a piece, so a
text counts as the sum of its parts wherever a piece provably ends at the join: after a line break that a row
follows (``line_splits``), after a row's leading citation id, and at the seams between rendered sections. The
rules are property-tested against the encoders (tests/unit/test_row_tokens.py); text of another shape, or
another encoding, is counted whole.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from shared.domain.tokens import count_tokens, count_tokens_batch, get_encoding

SECTION_SEPARATOR = "\n\n"
FENCE, RULE = "```", "-----"  # how a rendered section ends and begins (``budget.Section.render``)
SEAM_ENCODINGS = ("o200k_base", "cl100k_base")  # whose split patterns the seam and line rules are tested on


def line_splits(row: str) -> bool:
    """Whether the encoder starts a piece where ``row`` begins after a line break: its pattern ends a piece at
    a line break unless the next character is more whitespace or (after punctuation, o200k) a ``/``."""
    return bool(row) and not row[0].isspace() and row[0] != "/"


def exact_lines(rows: Sequence[str], model: str | None) -> bool:
    return get_encoding(model).name in SEAM_ENCODINGS and all(map(line_splits, rows))


_CITE = re.compile(r"[A-Za-z]{0,3}[0-9]{1,9}(?=,)")  # a row's leading citation id ("E3", "S12"), by position


def line_counts(rows: Sequence[str], model: str | None) -> list[int]:
    """Exact tokens of each ``row`` followed by its line break, memoized in two parts when the row starts with
    a citation id: the id (letters then digits) ends a piece before its comma, so the rest of the row, the same
    whichever position the row takes in a later query's context, is counted once per process."""
    parts: list[str] = []
    for row in rows:
        cite = _CITE.match(row)
        parts += [cite.group(), f"{row[cite.end():]}\n"] if cite else ["", f"{row}\n"]
    counts = count_tokens_batch(parts, model)
    return [counts[i] + counts[i + 1] for i in range(0, len(counts), 2)]


def joined_tokens(texts: Sequence[str], model: str | None, counts: Sequence[int] | None = None) -> int:
    """Tokens of rendered sections joined by ``SECTION_SEPARATOR``, without encoding the whole context again:
    each section was counted when it was fitted (the count cache has it). The encoder splits text into pieces
    by its pattern before merging tokens within a piece, and a rendered section begins with a rule
    (``-----`` then its title's letters) and ends with a fence on a line of its own, so the joined text splits
    exactly as its sections do except around each seam (fence, separator, rule): the seam's own count corrects
    the sum. ``counts``: the sections' own exact counts when known (``section_tokens``); one section is its own
    count (a naive context is not encoded again whole). Texts of another shape, or another encoding, are counted
    whole."""
    if len(texts) == 1 and counts is not None:
        return counts[0]
    shaped = all(t.startswith(RULE) and t[len(RULE):len(RULE) + 1].isalpha() and t.endswith("\n" + FENCE)
                 for t in texts)
    if len(texts) < 2 or not shaped or get_encoding(model).name not in SEAM_ENCODINGS:
        return count_tokens(SECTION_SEPARATOR.join(texts), model)
    seam = (count_tokens(FENCE + SECTION_SEPARATOR + RULE, model) - count_tokens(FENCE, model)
            - count_tokens(RULE, model))
    own = counts if counts is not None else count_tokens_batch(list(texts), model)
    return sum(own) + seam * (len(texts) - 1)


def shared_cut(a: str, b: str) -> int:
    """A position where the encoders of ``SEAM_ENCODINGS`` start a piece in both ``a`` and ``b``, as far into the text
    the two share as one can be found (0: none): a space that follows a character other than whitespace, inside their
    common prefix. Their patterns keep whitespace in a piece only as its leading character, as trailing line breaks
    (or ``/``), or as the whole piece, so the piece before such a space ends at it whatever follows: a text counts
    as its two sides counted apart (property-tested, tests/unit/test_stored_row_counts.py)."""
    lo, hi = 0, min(len(a), len(b))
    while lo < hi:  # the common prefix's length, by halving (slices compare in C)
        mid = (lo + hi + 1) // 2
        if a[lo:mid] == b[lo:mid]:
            lo = mid
        else:
            hi = mid - 1
    cut = a.rfind(" ", 1, lo)
    while cut > 0 and a[cut - 1].isspace():
        cut = a.rfind(" ", 1, cut)
    return max(cut, 0)
