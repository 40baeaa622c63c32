"""Context-overflow strategies for retrieved text that does not fit.

- relevance truncation: keep the paragraphs (or sentences) most relevant to the query, in original order;
- structure-preserving truncation: first and last paragraphs, the middle filled in order, an omission marker;
- map-reduce: summarize groups that fit, then combine (summarize callable injected);
- iterative refinement: answer, assess completeness, re-rank for the missing information, answer again.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from shared.domain.packing import group_rows
from shared.domain.retrieval.bm25 import BM25Index
from shared.domain.tokens import count_tokens, count_tokens_batch, truncate_text

OMISSION = "[... content omitted ...]"
SENTENCE_BREAK = r"(?<=[.!?。！？])\s+"  # whitespace after a sentence end (Latin and CJK punctuation)
_SENT_RE = re.compile(SENTENCE_BREAK)


def split_sentences(text: str) -> list[str]:
    return [s for s in _SENT_RE.split(text) if s.strip()]


def split_units(text: str) -> list[str]:
    """Paragraphs; a single paragraph falls back to sentences."""
    paras = [p for p in re.split(r"\n\s*\n", text) if p.strip()]
    if len(paras) > 1:
        return paras
    return split_sentences(text) or ([text] if text.strip() else [])


def lexical_scores(query: str, units: Sequence[str]) -> list[float]:
    """BM25 of each unit against the query (units as the corpus)."""
    if not units:
        return []
    return [float(x) for x in BM25Index([str(i) for i in range(len(units))], list(units)).scores(query)]


def relevance_truncate(
    text: str, query: str, max_tokens: int, model: str | None = None,
    scorer: Callable[[str, Sequence[str]], Sequence[float]] | None = None, joiner: str = "\n\n",
) -> str:
    """Keep the most query-relevant units that fit, re-ordered as in the original text."""
    if max_tokens <= 0:
        return ""
    if count_tokens(text, model) <= max_tokens:
        return text
    units = split_units(text)
    if len(units) <= 1:
        return truncate_text(text, max_tokens, model)
    scores = list((scorer or lexical_scores)(query, units))
    counts = count_tokens_batch(units, model)
    sep = count_tokens(joiner, model)
    chosen: list[int] = []
    used = 0
    for i in sorted(range(len(units)), key=lambda j: (-scores[j], j)):
        cost = counts[i] + (sep if chosen else 0)
        if used + cost <= max_tokens:
            chosen.append(i)
            used += cost
    out = joiner.join(units[i] for i in sorted(chosen))
    while out and count_tokens(out, model) > max_tokens:
        chosen = sorted(chosen)[:-1]
        out = joiner.join(units[i] for i in chosen)
    return out


def structure_truncate(text: str, max_tokens: int, model: str | None = None, joiner: str = "\n\n") -> str:
    """First and last units kept, the middle filled in order, then an omission marker."""
    if max_tokens <= 0:
        return ""
    if count_tokens(text, model) <= max_tokens:
        return text
    units = split_units(text)
    if len(units) <= 3:
        return truncate_text(text, max_tokens, model)
    intro, middle, outro = units[0], units[1:-1], units[-1]
    fixed = count_tokens(joiner.join([intro, OMISSION, outro]), model)
    if fixed > max_tokens:
        return truncate_text(text, max_tokens, model)
    kept: list[str] = []
    for para in middle:
        candidate = joiner.join([intro, *kept, para, OMISSION, outro])
        if count_tokens(candidate, model) > max_tokens:
            break
        kept.append(para)
    tail = [OMISSION] if len(kept) < len(middle) else []
    return joiner.join([intro, *kept, *tail, outro])


def shorten(text: str, query: str, max_tokens: int, strategy: str, model: str | None = None) -> str:
    if strategy == "structure":
        return structure_truncate(text, max_tokens, model)
    if strategy in ("relevance", "map_reduce"):
        return relevance_truncate(text, query, max_tokens, model)
    return ""


def group_by_budget(texts: Sequence[str], budget: int, model: str | None = None) -> list[list[int]]:
    """Consecutive groups of indices whose texts fit ``budget``; an oversized text is its own group."""
    return group_rows(count_tokens_batch(list(texts), model), budget)


def map_reduce(
    texts: Sequence[str], query: str, budget: int, summarize: Callable[[str, list[str]], str],
    model: str | None = None, max_rounds: int = 3, group_budget: int | None = None,
) -> tuple[str, int]:
    """Summarize groups of at most ``group_budget`` tokens (``summarize(query, texts)``), then the
    summaries, until the result fits ``budget``. Returns (text, number of summarize calls)."""
    group_budget = group_budget or budget
    calls = 0
    current = [t for t in texts if t.strip()]
    for _ in range(max_rounds):
        if count_tokens("\n\n".join(current), model) <= budget:
            return "\n\n".join(current), calls
        groups = group_by_budget(current, group_budget, model)
        new = []
        for g in groups:
            new.append(summarize(query, [truncate_text(current[i], group_budget, model) for i in g]))
            calls += 1
        current = new
        if len(current) == 1:
            break
    return truncate_text("\n\n".join(current), budget, model), calls


@dataclass
class RefinementStep:
    iteration: int
    context_ids: list[str]
    answer: str
    complete: bool
    missing: list[str] = field(default_factory=list)


def iterative_refinement(
    query: str,
    documents: Sequence[tuple[str, str]],
    answer: Callable[[str, list[tuple[str, str]]], str],
    assess: Callable[[str, str], tuple[bool, list[str]]],
    select: Callable[[str, Sequence[tuple[str, str]]], list[tuple[str, str]]],
    max_iterations: int = 2,
) -> tuple[str, list[RefinementStep]]:
    """Iterative refinement's loop: ``select`` fits documents for a (possibly enhanced) query, ``answer`` answers,
    ``assess`` returns (complete, missing info); stops when complete or after ``max_iterations``."""
    history: list[RefinementStep] = []
    focus = query
    final = ""
    for it in range(1, max_iterations + 1):
        ctx = select(focus, documents)
        final = answer(query, ctx)
        complete, missing = assess(query, final)
        history.append(RefinementStep(it, [d for d, _ in ctx], final, complete, list(missing)))
        if complete or not missing:
            break
        focus = f"{query}. Specifically need: {', '.join(missing)}"
    return final, history
