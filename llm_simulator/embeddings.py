"""The simulator's embeddings, chosen by ``SimConfig.embeddings``:

* ``local`` (the default): wordllama's static 256-dimension model, the one graphfleet's local embedder uses
  (``shared.infra.llm.local_embedder``). It knows meaning (it passes the synonym probe of
  ``shared.infra.llm.embedding``), so whatever goes through the simulator exercises vectors that rank by
  meaning and not by shared words alone.
* ``hashing``: a normalised sum of hashed word vectors (a bag of words: shared words mean similarity, nothing
  else does), for a test that needs embeddings that only see words.

Both are deterministic and unit length. The simulator stands in for an external service, so it loads the
model itself rather than through graphfleet's infrastructure; ``tests/unit/test_simulator_embeddings.py``
checks that its vectors are the local embedder's.
"""

from __future__ import annotations

import base64
import hashlib
import re
import threading
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path

import numpy as np

from .config import EMBEDDINGS, LOCAL_DIM
from .textutil import STOPWORDS

LOCAL_MODEL_CONFIG = "l2_supercat"  # wordllama's default English model, as the local embedder loads it

_WORD = re.compile(r"[a-z0-9]+")
_lock = threading.Lock()
_local_model = None


def local_model():
    """The wordllama model, loaded once per process (the simulators of one process share it) from the files
    its wheel ships: never downloads (``disable_download``; the weights and tokenizer sit in the package
    folder, which is why ``cache_dir`` points there: see the wordllama pin in pyproject.toml)."""
    global _local_model
    with _lock:
        if _local_model is None:
            import wordllama
            from wordllama import WordLlama

            package = Path(wordllama.__file__).resolve().parent
            _local_model = WordLlama.load(config=LOCAL_MODEL_CONFIG, dim=LOCAL_DIM, cache_dir=package,
                                          disable_download=True)
        return _local_model


class Embeddings:
    """``embed(texts, dim)``: one unit-length float32 row per text. ``max_dim``: the most dimensions it can
    serve (None: any)."""

    def __init__(self, kind: str):
        if kind not in EMBEDDINGS:
            raise ValueError(f"embeddings must be one of {EMBEDDINGS}, got {kind!r}")
        self.kind = kind
        self.max_dim = LOCAL_DIM if kind == "local" else None
        self.model = local_model() if kind == "local" else None  # loaded with the server, not per request

    def embed(self, texts: Sequence[str], dim: int) -> np.ndarray:
        if self.model is None:
            return np.stack([hashed(t, dim) for t in texts]) if texts else np.zeros((0, dim), np.float32)
        # the whole request in one call; the first ``dim`` of the model's dimensions, renormalised (Matryoshka)
        raw = np.asarray(self.model.embed(list(texts), norm=False), dtype=np.float64)[:, :dim]
        raw[~raw.any(axis=1)] = _word_vector("\x00empty", dim)  # no token (an empty text): a fixed vector
        return (raw / np.linalg.norm(raw, axis=1, keepdims=True)).astype(np.float32)


@lru_cache(maxsize=65536)
def _word_vector(word: str, dim: int) -> np.ndarray:
    seed = int.from_bytes(hashlib.blake2b(word.encode(), digest_size=8).digest(), "little")
    return np.random.default_rng(seed).standard_normal(dim).astype(np.float64)


def hashed(text: str, dim: int) -> np.ndarray:
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
