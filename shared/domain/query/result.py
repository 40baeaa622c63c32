"""Query results and per-phase usage (the extractive answer used when no LLM is configured: ``extractive``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

from pydantic import BaseModel, Field

from shared.domain.pricing import cost_usd
from shared.domain.query.budget import BudgetReport
from shared.domain.query.context_common import Sources
from shared.domain.query.extractive import Fact, extractive_answer, extractive_facts, render_extractive

ChatFn = Callable[[list[dict], str], Any]  # (messages, phase) -> ChatResult-like (.text, tokens)
# the extractive answer lives in its own module; its names stay importable from here
__all__ = ["ChatFn", "Fact", "FormatCheck", "PHASES", "PhaseUsage", "QueryResult", "UsageMeter", "extractive_answer",
           "extractive_facts", "render_extractive"]
PHASES = ("keywords", "rate", "map", "reduce", "analysis", "answer", "repair", "refine", "summarize")


class PhaseUsage(BaseModel):
    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    errors: int = 0


class FormatCheck(BaseModel):
    ok: bool = True
    problems: list[str] = Field(default_factory=list)
    repaired: bool = False  # one re-ask was made (its usage is under phase "repair")
    checked: bool = False


class QueryResult(BaseModel):
    answer: str = ""
    answer_kind: Literal["llm", "extractive", "none"] = "none"
    mode: str = ""
    context: str | None = None
    budget: BudgetReport = Field(default_factory=BudgetReport)
    sources: Sources = Field(default_factory=Sources)
    # id as cited in the context -> entity / relation / report / chunk id
    citations: dict[str, str] = Field(default_factory=dict)
    quality: dict = Field(default_factory=dict)
    format_check: FormatCheck = Field(default_factory=FormatCheck)
    # by phase; the worker may overwrite from its usage records
    usage: dict[str, PhaseUsage] = Field(default_factory=dict)
    partial: bool = False
    partial_reason: str | None = None
    notes: list[str] = Field(default_factory=list)
    # mode-specific: global plan / dynamic selection, refinement history, keywords
    details: dict = Field(default_factory=dict)

    def total_usage(self) -> PhaseUsage:
        t = PhaseUsage()
        for u in self.usage.values():
            t.calls += u.calls
            t.prompt_tokens += u.prompt_tokens
            t.completion_tokens += u.completion_tokens
            t.cost_usd += u.cost_usd
            t.errors += u.errors
        return t


class UsageMeter:
    """Wraps ``chat`` and accounts each call to its phase (thread-safe enough for += on ints under GIL)."""

    def __init__(self, chat: ChatFn, model: str | None, prices: dict | None = None):
        self.chat, self.model, self.prices = chat, model or "gpt-4o-mini", prices
        self.usage: dict[str, PhaseUsage] = {}

    def __call__(self, messages: list[dict], phase: str) -> str:
        u = self.usage.setdefault(phase, PhaseUsage())
        try:
            res = self.chat(messages, phase)
        except Exception:
            u.errors += 1
            raise
        u.calls += 1
        if isinstance(res, str):
            return res
        p, c = int(getattr(res, "prompt_tokens", 0) or 0), int(getattr(res, "completion_tokens", 0) or 0)
        u.prompt_tokens += p
        u.completion_tokens += c
        u.cost_usd += cost_usd(getattr(res, "model", None) or self.model, p, c, self.prices)
        return getattr(res, "text", "") or ""
