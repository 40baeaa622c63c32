"""The local embedder: wordllama's static 256-dimension model, loaded from the files its wheel ships.

Why this model: it knows meaning (it passes the synonym probe of ``shared.infra.llm.embedding``), needs no
key, no network and no GPU (its weights, 16 MB, are a lookup table averaged per text), so the embedded
default retrieves by meaning and not by words alone. With an LLM endpoint the endpoint's embedding model is
the default instead; ``GRAPHFLEET_EMBEDDING__PROVIDER=local`` keeps this one.

Loading never downloads: ``disable_download=True``, and ``cache_dir`` is the installed package folder,
where 0.4.0.post1 keeps its weights (``weights/``) and tokenizer (``tokenizers/``; the pin in
pyproject.toml says why).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from shared.infra.tenancy.usage import CallContext

MODEL_CONFIG = "l2_supercat"  # wordllama's default English model
DIMENSIONS = 256  # the smallest of its Matryoshka truncations, and the one in the wheel's weights
NAME = f"wordllama-{MODEL_CONFIG}-{DIMENSIONS}"

_EMPTY = np.full(DIMENSIONS, DIMENSIONS ** -0.5, dtype=np.float32)
_lock = threading.Lock()
_models: dict[int, object] = {}


def load_model(dim: int = DIMENSIONS):
    """The wordllama model (one per process: the weights are read once), from the installed wheel only."""
    with _lock:
        if dim not in _models:
            import wordllama
            from wordllama import WordLlama

            package = Path(wordllama.__file__).resolve().parent
            _models[dim] = WordLlama.load(config=MODEL_CONFIG, dim=dim, cache_dir=package, disable_download=True)
        return _models[dim]


class LocalEmbedder:
    """Unit-length wordllama vectors. ``recorder`` (a ``UsageRecorder``) books each call with stage ``embed``:
    inputs as prompt tokens (the model's own tokens, padding left out), latency, cost 0."""

    lexical = False

    def __init__(self, recorder=None, batch_size: int = 256):
        self.name, self.dim = NAME, DIMENSIONS
        self.recorder, self.batch_size = recorder, batch_size
        self.model = load_model(DIMENSIONS)

    def embed(self, texts: Sequence[str], ctx: CallContext | None = None) -> list[list[float]]:
        started = time.perf_counter()
        texts = list(texts)
        vectors, tokens = self._vectors(texts)
        # a text with no tokens embeds as zeros, which unit length turns into NaN: give it a fixed unit vector
        for i, text in enumerate(texts):
            if not text.strip() or not np.isfinite(vectors[i]).all():
                vectors[i] = _EMPTY
        if self.recorder is not None and ctx is not None:
            self._record(tokens, ctx, time.perf_counter() - started)
        return [v.tolist() for v in vectors]

    def _vectors(self, texts: list[str]) -> tuple[np.ndarray, int]:
        """(unit vectors of ``texts``, their tokens, padding left out). wordllama's own ``embed`` loop (tokenize a
        batch, look the tokens up, average them over the attention mask, normalise), run here for two reasons: the
        texts go shortest first, so a batch pads to about its own texts' length (in the texts' order one long
        entity description padded a whole batch of short ones to its length: the same vectors, several times the
        time), and the one tokenization also gives the token count the usage record books."""
        model = self.model
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        tokens = 0
        with np.errstate(invalid="ignore", divide="ignore"):
            for start in range(0, len(order), self.batch_size):
                rows = order[start : start + self.batch_size]
                encoded = model.tokenize([texts[i] for i in rows])
                ids = np.array([enc.ids for enc in encoded], dtype=np.int32)
                mask = np.array([enc.attention_mask for enc in encoded], dtype=np.float32)
                np.clip(ids, 0, model.embedding.shape[0] - 1, out=ids)
                pooled = model.avg_pool(model.embedding[ids], mask)
                out[rows] = pooled / np.linalg.norm(pooled, axis=1, keepdims=True)
                tokens += int(mask.sum())
        return out, tokens

    def _record(self, tokens: int, ctx: CallContext, seconds: float) -> None:
        from shared.domain.models import UsageRecord

        self.recorder.record(UsageRecord(
            tenant=ctx.tenant, job_id=ctx.job_id, stage="embed", model=self.name, kind="embedding",
            prompt_tokens=tokens, latency_s=seconds, cost_usd=0.0, queue=ctx.queue, tier=ctx.tier))
