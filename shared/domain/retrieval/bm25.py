"""A small BM25 index over (id, text) pairs that takes added, changed and removed documents without re-reading the
ones it holds.

Tokenization is deliberately simple and deterministic: lowercase, word split (CJK characters are
single tokens), English stopwords removed. The ids and the vocabulary are kept as ``StringTable``s (a buffer, not
a Python string each) and a question's words are looked up there.

Scoring is Lucene's BM25 (idf ``log(1 + (N - df + 0.5) / (df + 0.5))``, term part ``tf / (tf + k1 (1 - b + b
dl / avgdl))``), as bm25s computes it by default, to the same float32 scores. It is written here rather than taken
from bm25s because bm25s stores only the final scores, with the idf and the average length folded in: it cannot take
a new document without indexing the whole corpus again, and a tenant's index would then be rebuilt from all its
text after every batch. This index keeps each word's postings (document, term frequency) and each document's
length, so ``updated`` tokenizes only the documents that changed; a posting is scored when a query reads it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

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
K1, B = 1.5, 0.75


def tokenize(text: str) -> list[str]:
    return [t for t in _TOKEN_RE.findall(text.lower()) if t not in STOPWORDS]


class BM25Index:
    """``ids`` (a ``StringTable``), ``vocab`` (the words by token id) and the postings: for token ``t``,
    ``docs[indptr[t]:indptr[t + 1]]`` in ascending order with their term frequencies ``tf``; ``lengths``: each
    document's token count. ``digests``: optionally, per document, a fingerprint of what it was built from, set by
    the caller, so that a later update can tell the documents that changed (``shared.infra.store.bm25_cache``)."""

    def __init__(self, ids: Sequence[str], texts: Sequence[str], k1: float = K1, b: float = B):
        if len(ids) != len(texts):
            raise ValueError("ids and texts differ in length")
        self.log_at: tuple | None = None  # where its documents' change log stood when they were read (by the caller)
        self._set(StringTable.of([]), StringTable.of([]), np.zeros(1, np.int64), np.zeros(0, np.int32),
                  np.zeros(0, np.uint16), np.zeros(0, np.float32), None, k1, b)
        if len(ids):
            self._set(*_merge(self, [], list(zip(ids, texts, strict=True)), None))

    @classmethod
    def build(cls, pairs: Iterable[tuple[str, str]], digests: Sequence[int] | None = None, **kw) -> BM25Index:
        return cls([], [], **kw).updated((), pairs, digests)

    @classmethod
    def of_arrays(cls, ids: StringTable, vocab: StringTable, indptr: np.ndarray, docs: np.ndarray, tf: np.ndarray,
                  lengths: np.ndarray, digests: np.ndarray | None = None, k1: float = K1, b: float = B) -> BM25Index:
        """The index these arrays describe (a snapshot's); ``ValueError`` when they do not fit together."""
        n = len(ids)
        ok = (indptr.ndim == 1 and len(indptr) == len(vocab) + 1 and int(indptr[0]) == 0
              and int(indptr[-1]) == len(docs) == len(tf) and not bool(np.any(np.diff(indptr) < 0))
              and lengths.shape == (n,) and (digests is None or digests.shape == (n,))
              and (not docs.size or 0 <= int(docs.min()) <= int(docs.max()) < n))
        if not ok:
            raise ValueError("bm25 arrays do not fit together")
        index = cls([], [], k1=k1, b=b)
        index._set(ids, vocab, indptr, docs, tf, lengths, digests, k1, b)
        return index

    def _set(self, ids, vocab, indptr, docs, tf, lengths, digests, k1, b) -> None:
        self.ids, self.vocab, self.k1, self.b = ids, vocab, k1, b
        self.indptr = np.asarray(indptr, dtype=np.int64)
        self.docs = np.asarray(docs, dtype=np.int32)
        self.tf = _counts(tf)
        self.lengths = np.asarray(lengths, dtype=np.float32)
        self.digests = None if digests is None else np.asarray(digests, dtype=np.uint64)
        self._idf, self._norm = self._weights()

    def _weights(self) -> tuple[np.ndarray, np.ndarray]:
        """Each word's idf (float32, as bm25s keeps it) and each document's length norm ``k1 (1 - b + b dl /
        avgdl)``: a posting scores ``idf * tf / (tf + norm)``, computed when a query reads it, as bm25s computed it
        when indexing (so the scores are the same to the bit, and the index holds no score per posting)."""
        n = len(self.ids)
        if not n:
            return np.zeros(0, dtype=np.float32), np.zeros(0, dtype=np.float64)
        df = np.diff(self.indptr).astype(np.float64)
        idf = np.log(1 + (n - df + 0.5) / (df + 0.5)).astype(np.float32)
        lengths = self.lengths.astype(np.float64)
        return idf, self.k1 * ((1 - self.b) + self.b * lengths / float(lengths.mean()))

    def updated(self, removed: Iterable[str], added: Iterable[tuple[str, str]],
                digests: Sequence[int] | None = None) -> BM25Index:
        """A new index: this one without the ``removed`` ids, and with ``added`` (id, text) documents (an id held
        already is replaced). ``digests``: one per added document, when this index keeps them (or is empty).
        Only the added texts are tokenized; this index is left as it is (queries may be reading it)."""
        out = BM25Index([], [], k1=self.k1, b=self.b)
        out._set(*_merge(self, removed, list(added), digests))
        return out

    def __len__(self) -> int:
        return len(self.ids)

    @property
    def nbytes(self) -> int:
        """What the index holds in memory: postings, lengths and norms, idf, vocabulary and ids (what a
        byte-bounded cache counts)."""
        arrays = (self.indptr, self.docs, self.tf, self.lengths, self._idf, self._norm)
        return (sum(a.nbytes for a in arrays) + (0 if self.digests is None else self.digests.nbytes)
                + self.vocab.nbytes + self.ids.nbytes)

    def scores(self, query: str) -> np.ndarray:
        """Each document's BM25 score for ``query`` (a word not in the index adds nothing; a repeated word counts
        each time)."""
        s = np.zeros(len(self.ids), dtype=np.float32)
        for t in map(self.vocab.find, tokenize(query)):
            if t >= 0:
                lo, hi = int(self.indptr[t]), int(self.indptr[t + 1])
                docs, tf = self.docs[lo:hi], self.tf[lo:hi].astype(np.float64)
                s[docs] += (float(self._idf[t]) * (tf / (self._norm[docs] + tf))).astype(np.float32)
        return s

    def query(self, text: str, top_k: int = 10) -> list[tuple[str, float]]:
        """Best ``top_k`` ids with a positive score, highest first (ties keep corpus order)."""
        if top_k <= 0:
            return []
        s = self.scores(text)
        return [(self.ids[i], float(s[i])) for i in top_positive(s, top_k).tolist()]


def _merge(index: BM25Index, removed: Iterable[str], added: list[tuple[str, str]], digests):
    """The arrays of ``index`` less ``removed`` and the ids of ``added``, then ``added`` appended (``_set``'s
    arguments). Kept documents keep their order and postings; the postings stay sorted by word, then document."""
    if digests is not None and len(digests) != len(added):
        raise ValueError("one digest per added document")
    if len(index.ids) and (digests is None) != (index.digests is None):
        raise ValueError("an index with digests takes digests with its added documents, and only then")
    keep = np.ones(len(index.ids), dtype=bool)
    drop = {*removed, *(i for i, _ in added)}
    if drop and len(index.ids):
        at = {doc_id: i for i, doc_id in enumerate(index.ids)}  # one pass: cheaper than a search per id
        keep[[at[i] for i in drop if i in at]] = False
    kept = int(keep.sum())
    tokens = [tokenize(text) or [_EMPTY] for _, text in added]
    vocab, word_ids = _extend_vocab(index.vocab, tokens)
    # the kept postings, their documents renumbered in order; then the added documents' postings
    post_keep = keep[index.docs]
    renumber = np.cumsum(keep) - 1
    old_words = np.repeat(np.arange(len(index.vocab), dtype=np.int64), np.diff(index.indptr))[post_keep]
    new_words, new_docs, new_tf = _postings(tokens, word_ids, kept, len(vocab))
    words = np.concatenate([old_words, new_words])
    order = np.argsort(words, kind="stable")  # within a word: kept documents first, then added, both ascending
    docs = np.concatenate([renumber[index.docs[post_keep]], new_docs])[order]
    tf = np.concatenate([index.tf[post_keep], new_tf])[order]
    indptr = np.zeros(len(vocab) + 1, dtype=np.int64)
    np.cumsum(np.bincount(words, minlength=len(vocab)), out=indptr[1:])
    ids = StringTable.of([*(i for i, k in zip(index.ids, keep.tolist(), strict=True) if k), *(i for i, _ in added)])
    lengths = np.concatenate([index.lengths[keep], np.asarray([len(t) for t in tokens], dtype=np.float32)])
    kept_digests = (None if digests is None else
                    np.concatenate([np.zeros(0, np.uint64) if index.digests is None else index.digests[keep],
                                    np.asarray(digests, dtype=np.uint64)]))
    return ids, vocab, indptr, docs, tf, lengths, kept_digests, index.k1, index.b


def _counts(tf) -> np.ndarray:
    """Term frequencies as the smallest unsigned integers that hold them (two bytes a posting, nearly always)."""
    tf = np.asarray(tf)
    if tf.dtype.kind not in "ui" or (tf.dtype.kind == "i" and tf.size and int(tf.min()) < 0):
        raise ValueError("term frequencies are counts")
    return tf.astype(np.uint16 if not tf.size or tf.max() < 2**16 else np.uint32)


def _extend_vocab(vocab: StringTable, tokens: list[list[str]]) -> tuple[StringTable, dict[str, int]]:
    """The vocabulary with the words of ``tokens`` it lacks appended, and each of those words' token id."""
    words = {w for doc in tokens for w in doc}
    known = {w: i for i, w in enumerate(vocab)} if words else {}
    new = sorted(words - known.keys())
    word_ids = {w: known[w] for w in words if w in known}
    word_ids.update((w, len(vocab) + i) for i, w in enumerate(new))
    return (StringTable.of([*vocab, *new]) if new else vocab), word_ids


def _postings(tokens: list[list[str]], word_ids: dict[str, int], first_doc: int, n_words: int):
    """(word, document, term frequency) of each distinct word of each document, sorted by word then document;
    documents numbered from ``first_doc``."""
    if not tokens:
        return np.zeros(0, np.int64), np.zeros(0, np.int32), np.zeros(0, np.int64)
    flat = np.fromiter((word_ids[w] for doc in tokens for w in doc), dtype=np.int64)
    doc = np.repeat(np.arange(first_doc, first_doc + len(tokens), dtype=np.int64), [len(t) for t in tokens])
    span = first_doc + len(tokens)
    keys, counts = np.unique(flat * span + doc, return_counts=True)
    return keys // span, (keys % span).astype(np.int32), counts


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
