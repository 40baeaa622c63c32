"""Deterministic embeddings: a normalised sum of hashed word vectors, so shared words mean similarity."""

from __future__ import annotations

import base64
import hashlib
import re
from functools import lru_cache

import numpy as np

from .textutil import STOPWORDS

_WORD = re.compile(r"[a-z0-9]+")


@lru_cache(maxsize=65536)
def _word_vector(word: str, dim: int) -> np.ndarray:
    seed = int.from_bytes(hashlib.blake2b(word.encode(), digest_size=8).digest(), "little")
    return np.random.default_rng(seed).standard_normal(dim).astype(np.float64)


def embed(text: str, dim: int) -> np.ndarray:
    """Unit-norm float32 vector of ``dim``: content words weigh 1, stopwords 0.2; empty text gets a fixed vector."""
    tokens = _WORD.findall(text.lower())
    vec = np.zeros(dim, dtype=np.float64)
    for tok in tokens:
        vec += _word_vector(tok, dim) * (0.2 if tok in STOPWORDS else 1.0)
    norm = float(np.linalg.norm(vec))
    if norm == 0.0:
        vec = _word_vector("\x00empty", dim)
        norm = float(np.linalg.norm(vec))
    return (vec / norm).astype(np.float32)


def encode(vec: np.ndarray, encoding_format: str | None) -> list[float] | str:
    if encoding_format == "base64":
        return base64.b64encode(vec.astype("<f4").tobytes()).decode("ascii")
    return [float(x) for x in vec]
