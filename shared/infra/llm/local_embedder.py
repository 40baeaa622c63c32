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
        with np.errstate(invalid="ignore", divide="ignore"):
            vectors = self.model.embed(texts, norm=True, batch_size=self.batch_size) if texts else []
        # a text with no tokens embeds as zeros, which unit length turns into NaN: give it a fixed unit vector
        for i, text in enumerate(texts):
            if not text.strip() or not np.isfinite(vectors[i]).all():
                vectors[i] = _EMPTY
        if self.recorder is not None and ctx is not None:
            self._record(texts, ctx, time.perf_counter() - started)
        return [v.tolist() for v in vectors]

    def _record(self, texts: list[str], ctx: CallContext, seconds: float) -> None:
        from shared.domain.models import UsageRecord

        tokens = sum(sum(enc.attention_mask) for enc in self.model.tokenizer.encode_batch(texts)) if texts else 0
        self.recorder.record(UsageRecord(
            tenant=ctx.tenant, job_id=ctx.job_id, stage="embed", model=self.name, kind="embedding",
            prompt_tokens=tokens, latency_s=seconds, cost_usd=0.0, queue=ctx.queue, tier=ctx.tier))
