"""Would smaller extraction windows shorten an ingestion bound by generation time?

At ``--ms-per-completion-token 12.5`` an ingestion waits for its longest extraction answer, then that chunk's
gleaning, the longest summary and the report waves (``bench.cost_table``'s critical path). This bench answers
the question the ≤ 0.3× nano target raises without running a stack: it splits each chunk of the corpus (the
chunker's configured size and overlap, ``get_settings().chunking``: 1,200 and 100 tokens by default) into
windows of ``--windows`` tokens (50 tokens overlap) and asks the simulator's extraction rule, in-process,
what it would answer for each window (``records_of``) and for its gleaning round (``glean_records_of``).
Printed per window size: calls, the longest and median answer in tokens, the completion tokens of the whole
extraction, and the seconds the longest answer plus its gleaning would take at ``--ms-per-token``. Nothing
of graphfleet's runs here: it is the simulator's answer lengths.

    .venv/bin/python -m bench.extraction_windows [--windows 1200 800 600 400 300] [--out FILE]
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path

from bench.common import SAMPLE, emit
from llm_simulator.extraction import DEFAULT_TYPES, emitted_keys, glean_pool_of, glean_records_of, records_of, render
from shared.config import get_settings
from shared.domain.chunking import chunk_by_tokens
from shared.domain.tokens import count_tokens

OVERLAP = 50


def answers(text: str) -> tuple[int, int]:
    """(extraction answer tokens, gleaning answer tokens) the simulator gives a window of ``text``."""
    first = render(records_of(text, DEFAULT_TYPES))
    analysis, emitted, remaining = glean_pool_of(text, DEFAULT_TYPES, emitted_keys([first]))
    return count_tokens(first), count_tokens(render(glean_records_of(analysis, emitted, remaining)))


def measure(corpus: str, window: int, ms_per_token: float) -> dict:
    lengths: list[tuple[int, int]] = []
    chunking = get_settings().chunking
    size, overlap = chunking.size_tokens, chunking.overlap_tokens
    for chunk in chunk_by_tokens(corpus, "bench", size, overlap):
        pieces = [chunk.text] if window >= size else [w.text for w in chunk_by_tokens(chunk.text, "w", window, OVERLAP)]
        lengths += [answers(piece) for piece in pieces]
    first = [a for a, _ in lengths]
    longest = max(lengths, key=lambda pair: pair[0])
    return {"bench": "extraction_windows", "window_tokens": window, "calls": 2 * len(lengths),
            "longest_answer_tokens": longest[0], "median_answer_tokens": statistics.median(first),
            "completion_tokens": sum(a + g for a, g in lengths),
            "longest_with_gleaning_s": round(sum(longest) * ms_per_token / 1000, 1)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--windows", type=int, nargs="+", default=[1200, 800, 600, 400, 300])
    ap.add_argument("--corpus", type=Path, default=SAMPLE)
    ap.add_argument("--ms-per-token", type=float, default=12.5)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    corpus = args.corpus.read_text(encoding="utf-8")
    for window in args.windows:
        emit(measure(corpus, window, args.ms_per_token), args.out)


if __name__ == "__main__":
    main()
