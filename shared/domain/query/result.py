"""Query results, per-phase usage, and the extractive answer used when no LLM is configured."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, Literal

from pydantic import BaseModel, Field

from shared.domain.pricing import cost_usd
from shared.domain.prompts.delimiters import GRAPH_FIELD_SEP
from shared.domain.query.budget import BudgetReport
from shared.domain.query.context_common import Evidence, Sources
from shared.domain.query.truncation import SENTENCE_BREAK, lexical_scores

ChatFn = Callable[[list[dict], str], Any]  # (messages, phase) -> ChatResult-like (.text, tokens)
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


_SENT = re.compile(SENTENCE_BREAK + r"|\n+|" + re.escape(GRAPH_FIELD_SEP))


def _cite(ev: Evidence) -> str:
    label = {"entity": "Entities", "relation": "Relationships", "report": "Reports", "chunk": "Sources"}
    ref = f"{label.get(ev.kind, 'Data')} ({ev.cite})"
    docs = ", ".join(d for d in ev.doc_ids[:3] if d)
    return f"[Data: {ref}; Documents ({docs})]" if docs else f"[Data: {ref}]"


class Fact(BaseModel):
    """One sentence of the kept context an extractive answer quotes: its text, the evidence it came from, and
    where it starts in that evidence's text."""

    text: str
    evidence: Evidence
    offset: int


def _sentences(text: str) -> list[tuple[int, str]]:
    """(offset, sentence) of each sentence/fact of ``text``, without the whitespace around it."""
    out, pos = [], 0
    for stop, after in [*((m.start(), m.end()) for m in _SENT.finditer(text)), (len(text), len(text))]:
        piece = text[pos:stop]
        if piece.strip():
            out.append((pos + len(piece) - len(piece.lstrip()), piece.strip()))
        pos = after
    return out


def extractive_facts(query: str, sources: Sources, max_facts: int = 8) -> list[Fact]:
    """The top-ranked sentences/facts of the kept context (no LLM involved), best first, each once."""
    facts = [Fact(text=sent, evidence=ev, offset=at) for ev in sources.evidence
             for at, sent in _sentences(ev.text) if len(sent.split()) >= 3]
    if not facts:
        return []
    scores = lexical_scores(query, [f.text for f in facts])
    order = sorted(range(len(facts)), key=lambda i: (-scores[i], i))
    seen: set[str] = set()
    chosen = []
    for i in order:
        if facts[i].text in seen:
            continue
        seen.add(facts[i].text)
        chosen.append(facts[i])
        if len(chosen) >= max_facts:
            break
    return chosen


def render_extractive(facts: list[Fact]) -> str:
    if not facts:
        return ""
    return "Extractive answer (no LLM configured): the most relevant facts from the retrieved context.\n" + \
        "\n".join(f"- {f.text} {_cite(f.evidence)}" for f in facts)


def extractive_answer(query: str, sources: Sources, max_facts: int = 8) -> str:
    """Top-ranked sentences/facts of the kept context with their source ids (no LLM involved)."""
    return render_extractive(extractive_facts(query, sources, max_facts))
