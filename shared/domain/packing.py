"""Token-budgeted packing of CSV rows (pure): the one CSV row writer and the one greedy row fitter.

Every context that is cut to a token budget (community-report input, query context sections, map
groups, reduce points, description summary groups) packs rows the same way: in order, each row
costing its tokens plus one separator (the newline that joins it), while the running total fits.
Callers keep their own layout and verify the joined text with a real count (BPE is not additive).
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Sequence


def csv_row(values: Sequence, float_digits: int | None = 3) -> str:
    """One CSV row. Cells with line breaks are quoted (the writer only quotes characters of its line
    terminator, so it is given one and the row is returned without it). Floats are rounded to
    ``float_digits`` (``None``: written as they are).

    Rows of plain cells (``str``, ``int``, ``float``) are joined here, byte for byte as ``csv.writer`` writes
    them (minimal quoting, quotes doubled) but with ``str`` methods instead of the writer's per-character
    loop: a context renders hundreds of rows of thousands of characters per query. Anything else goes through
    the writer."""
    cells = []
    for value in values:
        cell = _plain_cell(value, float_digits)
        if cell is None:
            return _written_row(values, float_digits)
        cells.append(cell)
    if len(cells) == 1 and not cells[0]:  # the writer quotes a row made of one empty cell
        return _written_row(values, float_digits)
    return ",".join(cells)


def _plain_cell(value, float_digits: int | None) -> str | None:
    """``value`` as the writer writes it under minimal quoting, or None for a cell left to the writer."""
    kind = type(value)
    if kind is str:
        text = value
    elif kind is int:
        text = repr(value)
    elif kind is float:
        text = repr(value if float_digits is None else round(value, float_digits))
    else:
        return None
    if '"' in text:
        return '"' + text.replace('"', '""') + '"'
    if "," in text or "\n" in text or (_CR_QUOTED and "\r" in text):
        return '"' + text + '"'
    if "\x00" in text and not _NUL_PLAIN:
        return None
    return text


def _written_row(values: Sequence, float_digits: int | None) -> str:
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerow(
        [v if float_digits is None or not isinstance(v, float) else round(v, float_digits) for v in values]
    )
    return buf.getvalue()[:-1]


def fit_rows(
    counted: Iterable[tuple[int, int]], budget: int, used: int = 0, *, sep: int = 1, fill_floor: int | None = None
) -> tuple[list[int], int, int | None]:
    """Greedy packing of ``(index, tokens)`` rows, each costing ``tokens + sep``, into ``budget`` on top
    of ``used`` tokens. Stops at the first row that does not fit; with ``fill_floor`` skips it and tries
    the later rows while at least ``fill_floor`` tokens (after a separator) are left. ``counted`` is
    read lazily, so rows behind the stop are never counted. Returns (indexes kept, tokens used, first
    index left out or None)."""
    kept: list[int] = []
    first_out: int | None = None
    for i, n in counted:
        if used + n + sep <= budget:
            used += n + sep
            kept.append(i)
            continue
        first_out = i if first_out is None else first_out
        if fill_floor is None or budget - used - sep < fill_floor:
            break
    return kept, used, first_out


def prefix_fit(counts: Sequence[int], budget: int, sep: int = 1) -> int:
    """How many leading rows (each plus ``sep`` tokens) fit in ``budget`` tokens."""
    return len(fit_rows(enumerate(counts), budget, sep=sep)[0])


def group_rows(counts: Sequence[int], budget: int) -> list[list[int]]:
    """Consecutive groups of row indexes whose tokens (plus one separator each) fit ``budget``; a row
    that does not fit even alone is a group of its own."""
    groups: list[list[int]] = []
    current: list[int] = []
    used = 0
    for i, n in enumerate(counts):
        if current and used + n + 1 > budget:
            groups.append(current)
            current, used = [], 0
        current.append(i)
        used += n + 1
    if current:
        groups.append(current)
    return groups


def _writer_keeps(text: str) -> bool:
    try:
        return _written_row([text], None) == text
    except csv.Error:
        return False


# what this Python's writer does with a carriage return and a NUL (it has changed across versions)
_CR_QUOTED = not _writer_keeps("a\rb")
_NUL_PLAIN = _writer_keeps("a\x00b")
