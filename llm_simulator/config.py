"""Configuration of the LLM simulator."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class SimConfig:
    """Knobs of the simulator. Rates are shares in [0, 1]; limits of 0 (or None) mean unlimited.

    Rate limits are kept per model (as OpenAI does) over a sliding 60 s window; tokens counted are
    prompt + completion for chat, input tokens for embeddings.
    """

    port: int = 8765
    host: str = "127.0.0.1"
    latency_ms: float = 0.0
    error_rate: float = 0.0
    rate_limit_tpm: int | None = None
    rate_limit_rpm: int | None = None
    malformed_rate: float = 0.0
    seed: int = 0
    embedding_dim: int = 256
    log_level: str = "warning"

    def __post_init__(self) -> None:
        for name in ("error_rate", "malformed_rate"):
            value = float(getattr(self, name))
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"{name} must be in [0, 1], got {value}")
            setattr(self, name, value)
        if self.latency_ms < 0:
            raise ValueError("latency_ms must be >= 0")
        if self.embedding_dim < 1:
            raise ValueError("embedding_dim must be >= 1")
        for name in ("rate_limit_tpm", "rate_limit_rpm"):
            value = getattr(self, name)
            if value is not None and value < 0:
                raise ValueError(f"{name} must be >= 0")
