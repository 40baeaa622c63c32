"""A small BM25 index over (id, text) pairs, backed by bm25s.

Tokenization is deliberately simple and deterministic: lowercase, word split (CJK characters are
single tokens), English stopwords removed. The ids and the vocabulary are kept as ``StringTable``s (a buffer, not
a Python string each) and a question's words are looked up there, then scored by bm25s from their token ids: an
index loaded from its snapshot has no dict of its vocabulary to rebuild.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

import numpy as np

from shared.domain.retrieval.strings import StringTable

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
        self.ids = StringTable.of(ids)
        self.vocab = StringTable.of([])  # the indexed words, by token id
        self._retriever = None
        if len(self.ids):
            import bm25s  # lazy: keeps import of this module cheap

            corpus = [tokenize(t) or [_EMPTY] for t in texts]
            self._retriever = bm25s.BM25(k1=k1, b=b)
            self._retriever.index(corpus, show_progress=False)
            self.vocab = vocab_table(self._retriever.vocab_dict)
            self._retriever.vocab_dict = {}  # words are found in ``vocab``; bm25s scores token ids

    @classmethod
    def build(cls, pairs: Iterable[tuple[str, str]], **kw) -> BM25Index:
        items = list(pairs)
        return cls([i for i, _ in items], [t for _, t in items], **kw)

    def __len__(self) -> int:
        return len(self.ids)

    @property
    def nbytes(self) -> int:
        """What the index holds in memory: its score arrays, vocabulary and ids (what a byte-bounded cache
        counts)."""
        arrays = 0 if self._retriever is None else sum(
            a.nbytes for a in self._retriever.scores.values() if isinstance(a, np.ndarray))
        return arrays + self.vocab.nbytes + self.ids.nbytes

    def scores(self, query: str) -> np.ndarray:
        """Each document's BM25 score for ``query`` (a word not in the index adds nothing)."""
        if not len(self.ids):
            return np.zeros(0, dtype=np.float32)
        scored = len(self._retriever.scores["indptr"]) - 1  # bm25s's vocabulary may hold "" beyond its scores
        token_ids = [t for t in map(self.vocab.find, tokenize(query)) if 0 <= t < scored]
        if not token_ids:
            return np.zeros(len(self.ids), dtype=np.float32)
        return np.asarray(self._retriever.get_scores(token_ids), dtype=np.float32)

    def query(self, text: str, top_k: int = 10) -> list[tuple[str, float]]:
        """Best ``top_k`` ids with a positive score, highest first (ties keep corpus order)."""
        if top_k <= 0:
            return []
        s = self.scores(text)
        return [(self.ids[i], float(s[i])) for i in top_positive(s, top_k).tolist()]


def vocab_table(vocab: dict[str, int]) -> StringTable:
    """bm25s's vocabulary (word -> token id, the ids 0..n-1) as a table of the words by token id."""
    words = [""] * len(vocab)
    for word, token in vocab.items():
        words[token] = word
    return StringTable.of(words)


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
