"""USD per 1M tokens (input, output). Overridable with settings ``llm.prices``."""

from __future__ import annotations

PRICES_PER_MTOK: dict[str, tuple[float, float]] = {
    "gpt-4o": (2.50, 10.00),
    "gpt-4o-mini": (0.15, 0.60),
    "gpt-4.1": (2.00, 8.00),
    "gpt-4.1-mini": (0.40, 1.60),
    "gpt-4.1-nano": (0.10, 0.40),
    "gpt-5": (1.25, 10.00),
    "gpt-5-mini": (0.25, 2.00),
    "gpt-5-nano": (0.05, 0.40),
    "o3": (2.00, 8.00),
    "o4-mini": (1.10, 4.40),
    "gpt-4-turbo": (10.00, 30.00),
    "gpt-4": (30.00, 60.00),
    "gpt-3.5-turbo": (0.50, 1.50),
    "text-embedding-3-small": (0.02, 0.0),
    "text-embedding-3-large": (0.13, 0.0),
    "text-embedding-ada-002": (0.10, 0.0),
}


def price_for(model: str, overrides: dict[str, tuple[float, float]] | None = None) -> tuple[float, float]:
    table = {**PRICES_PER_MTOK, **(overrides or {})}
    if model in table:
        return table[model]
    # longest known prefix (e.g. dated snapshots "gpt-4o-2024-08-06")
    best = max((k for k in table if model.startswith(k)), key=len, default=None)
    return table[best] if best else (0.0, 0.0)


def cost_usd(
    model: str, prompt_tokens: int, completion_tokens: int, overrides: dict | None = None
) -> float:
    price_in, price_out = price_for(model, overrides)
    return (prompt_tokens * price_in + completion_tokens * price_out) / 1_000_000
