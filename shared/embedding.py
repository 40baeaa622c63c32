"""Embedders: the configured OpenAI-compatible embedding model, or a local hashing embedder
when no LLM endpoint is configured (weak but deterministic; BM25 carries retrieval then)."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from typing import Protocol

import numpy as np

from shared.llm.usage import CallContext

_WORD = re.compile(r"[a-z0-9]+")


class Embedder(Protocol):
    name: str

    def embed(self, texts: Sequence[str], ctx: CallContext) -> list[list[float]]: ...


class HashingEmbedder:
    """Signed feature hashing of word unigrams and bigrams, L2-normalised."""

    def __init__(self, dim: int = 256):
        self.dim = dim
        self.name = f"hashing-{dim}"

    def _vec(self, text: str) -> np.ndarray:
        words = _WORD.findall(text.lower())
        feats = words + [a + " " + b for a, b in zip(words, words[1:], strict=False)]
        v = np.zeros(self.dim, dtype=np.float32)
        for f in feats:
            h = int.from_bytes(hashlib.blake2b(f.encode(), digest_size=8).digest(), "little")
            v[h % self.dim] += 1.0 if (h >> 63) & 1 else -1.0
        n = np.linalg.norm(v)
        return v / n if n else v

    def embed(self, texts: Sequence[str], ctx: CallContext) -> list[list[float]]:
        return [self._vec(t).tolist() for t in texts]


class LLMEmbedder:
    """Embeddings through ``LLMClient.embed`` (usage recorded with stage ``embed``)."""

    def __init__(self, client, model: str, batch_size: int = 64):
        self.client = client
        self.name = model
        self.batch_size = batch_size

    def embed(self, texts: Sequence[str], ctx: CallContext) -> list[list[float]]:
        out: list[list[float]] = []
        for i in range(0, len(texts), self.batch_size):
            out.extend(self.client.embed(list(texts[i : i + self.batch_size]), ctx, model=self.name))
        return out


def make_embedder(settings, llm_client=None) -> Embedder:
    if settings.llm_enabled and llm_client is not None:
        return LLMEmbedder(llm_client, settings.embedding_model, settings.embedding.batch_size)
    return HashingEmbedder(settings.embedding.dim)
