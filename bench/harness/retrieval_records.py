"""bench/suites/retrieval.py's records, without a stack: recall and answer-in-context (a gold answer or an alias in
the context as whole words), the chunk -> passage map, BM25's allowance, the per-question and per-set records."""

from __future__ import annotations

import re
import statistics
from collections.abc import Iterable

from bench.harness.datasets import norm
from bench.harness.results import median as _median

PASSAGE_SECTION = "sources"  # the section of chunk texts (naive, local, hybrid, causal)
_PUNCT = re.compile(r"[^\w\s]|_")  # ASCII string.punctuation and every other non-word, non-space character
_ARTICLES = re.compile(r"\b(a|an|the)\b")
EXCLUDED = frozenset({"", "yes", "no"})


def normalize(text: str, punct: str = "") -> str:
    """SQuAD's answer normalisation; ``punct=" "`` turns punctuation into a space instead of removing it."""
    return " ".join(_ARTICLES.sub(" ", _PUNCT.sub(punct, text.lower())).split())


def answer_in_context(context: str, answers: list[str]) -> bool | None:
    """True when any answer or alias is in the context as whole words (punctuation removed, or made spaces);
    None when the question is left out (its first answer empty, yes or no)."""
    if not answers or normalize(answers[0]) in EXCLUDED:
        return None
    forms = [(f" {normalize(context, punct)} ", punct) for punct in ("", " ")]
    return any(words not in EXCLUDED and f" {words} " in form
               for a in answers for form, punct in forms for words in [normalize(a, punct)])


def _present(context: str, keys: list[str], passages: dict[str, str]) -> list[bool]:
    """Per gold passage: its whole text, as whole word tokens, is in the (normalised) context."""
    ctx = f" {norm(context)} "
    return [k in passages and bool(words := norm(passages[k])) and f" {words} " in ctx for k in keys]


def recall(context: str, keys: list[str], passages: dict[str, str]) -> float:
    return sum(_present(context, keys, passages)) / len(keys) if keys else 0.0


def chunk_passage_map(chunks: dict[str, str], docs: dict[str, str]) -> dict[str, str]:
    """chunk id -> passage key: the passage whose document is the chunk's text, else the same once normalised
    (a few passages differ only in punctuation or spacing), else the first document holding the chunk."""
    exact = {doc.strip(): key for key, doc in reversed(docs.items())}
    by_text: dict[str, str] = {}
    for key, doc in docs.items():
        by_text.setdefault(norm(doc), key)
    out: dict[str, str] = {}
    for cid, text in chunks.items():
        words = norm(text)
        key = exact.get(text.strip()) or by_text.get(words)
        if key is None and words:
            key = next((k for d, k in by_text.items() if f" {words} " in f" {d} "), None)
        if key is not None:
            out[cid] = key
    return out


def carries_passages(result: dict) -> bool:
    """The mode puts chunk texts in its context (global's context is community reports)."""
    sections = (result.get("budget") or {}).get("sections") or []
    return any(s.get("name") == PASSAGE_SECTION for s in sections) or \
        isinstance((result.get("details") or {}).get("candidates"), list)


def graphfleet_keys(result: dict, chunk_keys: dict[str, str]) -> tuple[list[str | None] | None, set[str]]:
    """(candidate chunks as passage keys in rank order, or None without candidates), the kept chunks' keys."""
    candidates = (result.get("details") or {}).get("candidates")
    ranked = [chunk_keys.get(c) for c in candidates] if isinstance(candidates, list) else None
    kept = {chunk_keys[c] for c in (result.get("sources") or {}).get("chunks") or [] if c in chunk_keys}
    return ranked, kept


def question_record(head: dict, q: dict, context: str, passages: dict[str, str], *, result: dict | None = None,
                    ranked: list[str | None] | None = None, kept: set[str] | None = None,
                    context_tokens: int = 0, seconds: float | None = None) -> dict:
    """One question in one mode: ``head`` (set, llm, system, mode) plus where each gold passage went."""
    result = result or {}
    budget = result.get("budget") or {}
    first = {}
    for i, key in enumerate(ranked or []):
        first.setdefault(key, i + 1)
    gold = [{"key": k, "candidate_rank": first.get(k), "kept": None if kept is None else k in kept, "in_context": p}
            for k, p in zip(q["gold"], _present(context, q["gold"], passages), strict=True)]
    return {"bench": "retrieval_question", **head, "qid": q["qid"], "source": q.get("source"), "gold": gold,
            "candidates": None if ranked is None else len(ranked),
            "section_tokens": {s["name"]: s.get("tokens_used", 0) for s in budget.get("sections") or []},
            "total_tokens": budget.get("total_tokens"), "allowance": budget.get("total_allowed"),
            "carries_passages": carries_passages(result), "context_tokens": context_tokens,
            "recall": sum(g["in_context"] for g in gold) / len(gold) if gold else 0.0,
            "answer_in_context": answer_in_context(context, q.get("answers") or []),
            "seconds": None if seconds is None else round(seconds, 4),
            "context_ms": (result.get("details") or {}).get("context_ms")}


def bm25_allowances(records: Iterable[dict], budget: int) -> dict[str, tuple[int, str | None]]:
    """Per question id: the largest ``total_allowed`` any passage-carrying mode got, and that mode (BM25's same
    allowance); ``(budget, None)`` where no such mode answered."""
    best: dict[str, tuple[int, str | None]] = {}
    for r in records:
        allowed = r.get("allowance") or 0
        if r.get("carries_passages") and allowed > best.get(r["qid"], (0, None))[0]:
            best[r["qid"]] = (allowed, r["mode"])
        else:
            best.setdefault(r["qid"], (0, None))
    return {qid: (allowed, mode) if mode else (budget, None) for qid, (allowed, mode) in best.items()}


def mode_stats(records: list[dict], budget: int) -> dict:
    """One mode's questions: mean recall, answer-in-context, contexts over the budget, and medians."""
    n = len(records)
    used = [r["total_tokens"] / r["allowance"] for r in records if r.get("allowance") and r.get("total_tokens")
            is not None]
    answers = [a for r in records if (a := r.get("answer_in_context")) is not None]  # None: not counted
    return {"questions": n, "recall": round(statistics.mean(r["recall"] for r in records), 4) if n else None,
            "answer_in_context": round(sum(answers) / len(answers), 4) if answers else None,
            "answer_questions": len(answers),
            "context_tokens_median": _median([r["context_tokens"] for r in records]),
            "over_budget": sum(r["context_tokens"] > budget for r in records),
            "allowance_median": _median([r.get("allowance") for r in records]),
            "allowance_used_median": _median(used, 4), "seconds_p50": _median([r.get("seconds") for r in records], 4),
            "context_ms_p50": _median([r.get("context_ms") for r in records], 2)}


BASELINES = ("bm25", "bm25_full", "hybrid_baseline", "dense")  # summary keys


def set_summary(head: dict, by_mode: dict[str, list[dict]], budget: int, passages: int, **extra) -> dict:
    """``retrieval_set``: ``head`` (set, llm, system) with each mode's stats, each baseline's (``extra``'s
    records named in ``BASELINES``) and ``extra``'s other fields (e.g. the baselines' embedding cost)."""
    baselines = {b: rs for b in BASELINES if (rs := extra.pop(b, None)) is not None}
    questions = max((len(v) for v in by_mode.values()), default=len(baselines.get("bm25") or []))
    return {"bench": "retrieval_set", **head, "questions": questions, "passages": passages, "budget": budget,
            "budget_encoding": "cl100k_base", "modes": {m: mode_stats(rs, budget) for m, rs in by_mode.items()},
            **{b: mode_stats(rs, budget) for b, rs in baselines.items()}, **extra}

