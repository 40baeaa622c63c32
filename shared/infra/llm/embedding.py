"""Embedders, chosen by ``GRAPHFLEET_EMBEDDING__PROVIDER`` (``Settings.embedding_provider``): the configured
OpenAI-compatible embedding model ("openai"), the local model shipped in the wordllama wheel ("local", the
default with no endpoint: ``shared.infra.llm.local_embedder``), or hashed words ("hashing": lexical,
deterministic, BM25 carries retrieval then)."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from typing import Protocol

import numpy as np

from shared.infra.tenancy.usage import CallContext

_WORD = re.compile(r"[a-z0-9]+")


class Embedder(Protocol):
    name: str

    def embed(self, texts: Sequence[str], ctx: CallContext) -> list[list[float]]: ...


class HashingEmbedder:
    """Signed feature hashing of word unigrams and bigrams, L2-normalised. Lexical: it sees the same
    words BM25 scores, so retrieval gives BM25 the whole say by default (``QueryParam.bm25_weight``)."""

    lexical = True

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


# Pairs of words with the same meaning and no letters of a word in common: an embedder that places each
# word nearer its synonym than the other words knows meaning; one that hashes words (a bag of words)
# cannot, since for it two different words are unrelated.
SYNONYM_PROBE = (("film", "movie"), ("physician", "doctor"), ("automobile", "car"), ("purchase", "buy"),
                 ("large", "big"), ("begin", "start"), ("ocean", "sea"), ("infant", "baby"),
                 ("attorney", "lawyer"), ("rapid", "fast"))
SEMANTIC_AUC = 0.75  # share of (synonym, other word) comparisons the synonym must win


def synonym_auc(vectors: Sequence[Sequence[float]]) -> float:
    """Given the probe's words embedded in order (a1, b1, a2, b2, ...): the share of comparisons in which
    a word's cosine with its synonym beats its cosine with another pair's word (0.5 = chance)."""
    m = np.asarray(vectors, dtype=np.float64)
    m /= np.maximum(np.linalg.norm(m, axis=1, keepdims=True), 1e-12)
    sims = m @ m.T
    wins, total = 0.0, 0
    for i in range(0, len(m), 2):
        for a, b in ((i, i + 1), (i + 1, i)):
            others = [j for j in range(len(m)) if j not in (i, i + 1)]
            wins += sum(1.0 if sims[a, b] > sims[a, j] else 0.5 if sims[a, b] == sims[a, j] else 0.0
                        for j in others)
            total += len(others)
    return wins / total if total else 0.5


def is_lexical(embedder, ctx: CallContext) -> bool:
    """Whether ``embedder`` only sees words (hashing, bag of words): declared by the embedder, else
    measured once with the synonym probe (one embedding call of 20 words). Retrieval then gives BM25
    the whole say (see ``shared.domain.query.params.BM25_WEIGHT_*``); an embedder that knows meaning shares it."""
    declared = getattr(embedder, "lexical", None)
    if declared is not None:
        return bool(declared)
    words = [w for pair in SYNONYM_PROBE for w in pair]
    return synonym_auc(embedder.embed(words, ctx)) < SEMANTIC_AUC


class LLMEmbedder:
    """Embeddings through ``LLMClient.embed`` (usage recorded with stage ``embed``). Whether the model
    knows meaning is measured (``is_lexical``) the first time a query asks, once per process; its dimensions
    (``dim``) are known from its first answer on (None before)."""

    lexical: bool | None = None

    def __init__(self, client, model: str, batch_size: int = 64):
        self.client = client
        self.name = model
        self.batch_size = batch_size
        self.dim: int | None = None

    def embed(self, texts: Sequence[str], ctx: CallContext) -> list[list[float]]:
        out: list[list[float]] = []
        for i in range(0, len(texts), self.batch_size):
            out.extend(self.client.embed(list(texts[i : i + self.batch_size]), ctx, model=self.name))
        if out:
            self.dim = len(out[0])
        return out


def make_embedder(settings, llm_client=None, recorder=None) -> Embedder:
    """The embedder ``settings.embedding_provider`` names. "openai" needs the LLM client (an endpoint);
    without one, outside development, the LLM-free mode must be chosen (``GRAPHFLEET_LLM_FREE=true``), else
    ``shared.config.LLMModeError``. ``recorder`` books the local embedder's calls (the client books its own)."""
    provider = settings.embedding_provider
    if provider == "openai":
        if llm_client is None:
            raise ValueError("GRAPHFLEET_EMBEDDING__PROVIDER=openai needs an endpoint: set GRAPHFLEET_LLM_BASE_URL")
        return LLMEmbedder(llm_client, settings.embedding_model, settings.embedding.batch_size)
    if not settings.llm_enabled:
        settings.check_llm_mode()
    if provider == "hashing":
        return HashingEmbedder(settings.embedding.dim)
    from shared.infra.llm.local_embedder import LocalEmbedder

    return LocalEmbedder(recorder, settings.embedding.batch_size)


def embedder_summary(settings) -> str:
    """Which embedder ``settings`` choose, in the reader's words (``graphfleet up``): provider, model, where it runs."""
    provider = settings.embedding_provider
    if provider == "local":
        from shared.infra.llm.local_embedder import NAME

        return f"local ({NAME}, no network)"
    if provider == "hashing":
        return f"hashing (hashing-{settings.embedding.dim}, words only, no network)"
    where = "at the LLM endpoint" if settings.llm_enabled else "needs GRAPHFLEET_LLM_BASE_URL"
    return f"openai ({settings.embedding_model}, {where})"
