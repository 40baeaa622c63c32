"""LLM-free extraction (``extract_chunk_fast``, what ingestion runs with no LLM configured): milliseconds per
chunk of the Christmas Carol, 1200-token chunks as ingestion cuts them. Was a pass/fail bound in
``tests/unit/test_fast_extractor.py`` (< 50 ms a chunk); timings live here.

    .venv/bin/python -m bench.fast_extract_bench [--repeat 5] [--out bench/results/fast_extract.jsonl]
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

from bench.common import SAMPLE, emit, machine
from shared.domain.chunking import chunk_by_tokens
from shared.domain.extraction.fast_extractor import extract_chunk_fast


def per_chunk_ms(texts: list[str]) -> float:
    """One pass over ``texts``: mean milliseconds per chunk."""
    started = time.perf_counter()
    for i, text in enumerate(texts):
        extract_chunk_fast(text, f"c{i}", "doc")
    return 1000 * (time.perf_counter() - started) / len(texts)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=5, help="passes over the corpus (the first one included)")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)
    texts = [c.text for c in chunk_by_tokens(SAMPLE.read_text(encoding="utf-8"), "doc", 1200, 100)]
    runs = [round(per_chunk_ms(texts), 2) for _ in range(args.repeat)]
    emit({"bench": "fast_extract", "corpus": SAMPLE.name, "chunks": len(texts), "ms_per_chunk": runs,
          "ms_per_chunk_median": statistics.median(runs), "machine": machine()}, args.out)


if __name__ == "__main__":
    main()
