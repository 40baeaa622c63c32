"""A small BM25 index over (id, text) pairs, backed by bm25s.

Tokenization is deliberately simple and deterministic: lowercase, word split (CJK characters are
single tokens), English stopwords removed.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterable

import numpy as np

STOPWORDS = frozenset(
    """a about above after again against all am an and any are as at be because been before being
    below between both but by can could did do does doing down during each few for from further had
    has have having he her here hers herself him himself his how i if in into is it its itself just
    me more most my myself no nor not now of off on once only or other our ours ourselves out over
    own same she should so some such than that the their theirs them themselves then there these
    they this those through to too under until up very was we were what when where which while who
    whom why will with would you your yours yourself yourselves s t don""".split()
)
_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af"
_TOKEN_RE = re.compile(rf"[{_CJK}]|[^\W_{_CJK}]+")
_EMPTY = "\x00"  # placeholder token for documents with no indexable words


DICT_ENTRY_BYTES = 100  # a dict or set entry with its int value, beyond the key string (CPython, 64-bit)


def strings_nbytes(items: Iterable[str]) -> int:
    """The memory of some strings with the list slot that holds each."""
    return sum(sys.getsizeof(s) + 8 for s in items)


def tokenize(text: str) -> list[str]:
    return [t for t in _TOKEN_RE.findall(text.lower()) if t not in STOPWORDS]


def preload() -> None:
    """Import bm25s now: a query worker calls this before it consumes, so that the first index it builds (the
    warm-up after a fresh stack's first ingestion, which that job waits for) does not pay the import (this
    module imports it lazily so that importing it stays cheap)."""
    import bm25s  # noqa: F401


class BM25Index:
    def __init__(self, ids: list[str], texts: list[str], k1: float = 1.5, b: float = 0.75):
        if len(ids) != len(texts):
            raise ValueError("ids and texts differ in length")
        self.ids = list(ids)
        self._retriever = None
        if self.ids:
            import bm25s  # lazy: keeps import of this module cheap

            corpus = [tokenize(t) or [_EMPTY] for t in texts]
            self._retriever = bm25s.BM25(k1=k1, b=b)
            self._retriever.index(corpus, show_progress=False)

    @classmethod
    def build(cls, pairs: Iterable[tuple[str, str]], **kw) -> BM25Index:
        items = list(pairs)
        return cls([i for i, _ in items], [t for _, t in items], **kw)

    def __len__(self) -> int:
        return len(self.ids)

    @property
    def nbytes(self) -> int:
        """About what the index holds in memory: its score arrays, vocabulary and ids (what a byte-bounded
        cache counts)."""
        if self._retriever is None:
            return strings_nbytes(self.ids)
        arrays = sum(a.nbytes for a in self._retriever.scores.values() if isinstance(a, np.ndarray))
        vocab = strings_nbytes(self._retriever.vocab_dict) + DICT_ENTRY_BYTES * len(self._retriever.vocab_dict)
        return arrays + vocab + strings_nbytes(self.ids)

    def scores(self, query: str) -> np.ndarray:
        terms = tokenize(query)
        if not self.ids or not terms:
            return np.zeros(len(self.ids), dtype=np.float32)
        return np.asarray(self._retriever.get_scores(terms), dtype=np.float32)

    def query(self, text: str, top_k: int = 10) -> list[tuple[str, float]]:
        """Best ``top_k`` ids with a positive score, highest first (ties keep corpus order)."""
        if top_k <= 0:
            return []
        s = self.scores(text)
        return [(self.ids[i], float(s[i])) for i in top_positive(s, top_k).tolist()]


def top_positive(scores: np.ndarray, k: int) -> np.ndarray:
    """Positions of the ``k`` highest positive scores, highest first, ties in position order: what a stable sort
    of every score would put first, found among the positive scores alone and, when more than ``k`` are positive,
    among those at least the ``k``-th highest (a partition), so a query sorts what it keeps, not the whole index."""
    if k <= 0 or not scores.size:
        return np.zeros(0, dtype=np.int64)
    pos = np.flatnonzero(scores > 0)
    vals = scores[pos]
    if len(pos) > k:
        kth = np.partition(vals, len(vals) - k)[len(vals) - k]  # the k-th highest positive score
        keep = vals >= kth  # every tie of the k-th is kept: the stable order below picks among them by position
        pos, vals = pos[keep], vals[keep]
    return pos[np.argsort(-vals, kind="stable")[:k]]
