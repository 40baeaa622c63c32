"""Configuration of the LLM simulator."""

from __future__ import annotations

from dataclasses import dataclass

EMBEDDINGS = ("local", "hashing")  # the kinds of vectors served (llm_simulator.embeddings)
LOCAL_DIM = 256  # the local model's dimensions (the weights in wordllama's wheel); a request may ask for fewer


@dataclass
class SimConfig:
    """Knobs of the simulator. Rates are shares in [0, 1]; limits of 0 (or None) mean unlimited.

    Rate limits are kept per model (as OpenAI does) over a sliding 60 s window; tokens counted are
    prompt + completion for chat, input tokens for embeddings.

    Latency: every request waits ``latency_ms``; a chat completion waits ``ms_per_completion_token`` per
    token of its answer on top (a model generating at 1000 / that many tokens per second; a streamed
    answer spreads that wait over its chunks). Embeddings wait ``latency_ms`` only.

    Embeddings (``embeddings``): "local", wordllama's 256-dimension model (knows meaning), or "hashing",
    hashed bags of words (only shared words count); see ``llm_simulator.embeddings``. ``embedding_dim`` is
    the dimensions served when a request does not ask (``dimensions``); the local model serves at most 256.
    """

    port: int = 8765
    host: str = "127.0.0.1"
    latency_ms: float = 0.0
    ms_per_completion_token: float = 0.0
    error_rate: float = 0.0
    rate_limit_tpm: int | None = None
    rate_limit_rpm: int | None = None
    malformed_rate: float = 0.0
    seed: int = 0
    embeddings: str = "local"
    embedding_dim: int = 256
    log_level: str = "warning"

    def __post_init__(self) -> None:
        for name in ("error_rate", "malformed_rate"):
            value = float(getattr(self, name))
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"{name} must be in [0, 1], got {value}")
            setattr(self, name, value)
        for name in ("latency_ms", "ms_per_completion_token"):
            value = float(getattr(self, name))
            if not value >= 0:  # also refuses NaN
                raise ValueError(f"{name} must be >= 0, got {value}")
            setattr(self, name, value)
        if self.embeddings not in EMBEDDINGS:
            raise ValueError(f"embeddings must be one of {EMBEDDINGS}, got {self.embeddings!r}")
        if self.embedding_dim < 1:
            raise ValueError("embedding_dim must be >= 1")
        if self.embeddings == "local" and self.embedding_dim > LOCAL_DIM:
            raise ValueError(f"the local embedding model has {LOCAL_DIM} dimensions, not {self.embedding_dim}")
        for name in ("rate_limit_tpm", "rate_limit_rpm"):
            value = getattr(self, name)
            if value is not None and value < 0:
                raise ValueError(f"{name} must be >= 0")

    def completion_delay_s(self, completion_tokens: int) -> float:
        """The generation time of an answer of ``completion_tokens`` tokens (on top of ``latency_ms``)."""
        return max(0, completion_tokens) * self.ms_per_completion_token / 1000.0
