"""``csv_row`` joins plain cells itself: byte for byte what ``csv.writer`` writes, for every kind of cell."""

from __future__ import annotations

import csv
import io
import random

from shared.domain.packing import csv_row


def _writer(values, float_digits=3) -> str:
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerow(
        [v if float_digits is None or not isinstance(v, float) else round(v, float_digits) for v in values])
    return buf.getvalue()[:-1]


ALPHABET = 'ab ,"\n\r\t\'x;|\\é—…0'


def test_plain_cells_are_written_exactly_as_the_csv_writer_writes_them():
    rng = random.Random(7)
    cases = [[""], ["", ""], ["x"], [" lead"], ["a,b"], ['say "hi"'], ["two\nlines"], ["cr\rhere"], ['"'], [",", '"'],
             [1, 2.5, -0.0, 1e20, float("nan"), True, None, "s"], [3.14159265], ["E1", "SCROOGE", "person", "", 7]]
    for _ in range(2000):
        cells = []
        for _ in range(rng.randint(1, 5)):
            kind = rng.random()
            if kind < 0.7:
                cells.append("".join(rng.choice(ALPHABET) for _ in range(rng.randint(0, 12))))
            elif kind < 0.85:
                cells.append(rng.randint(-1000, 1000))
            else:
                cells.append(rng.uniform(-10, 10))
        cases.append(cells)
    for cells in cases:
        for digits in (3, None):
            assert csv_row(cells, digits) == _writer(cells, digits), cells
