"""bench/suites/retrieval.py's records, without a stack: recall, the chunk -> passage map, BM25's allowance,
the per-question record, the per-set summary and the macro average over sets (their report tables:
bench/report/retrieval_sets.py)."""

from __future__ import annotations

import statistics
from collections.abc import Iterable

from bench.harness.datasets import norm
from bench.harness.retrieval_answers import answer_in_context

PASSAGE_SECTION = "sources"  # the section of chunk texts (naive, local, hybrid, causal)


def _padded(text: str) -> str:
    return f" {norm(text)} "


def present(padded_context: str, text: str) -> bool:
    """The passage's whole text, as whole word tokens, in the (normalised, padded) context."""
    words = norm(text)
    return bool(words) and f" {words} " in padded_context


def recall(context: str, keys: list[str], passages: dict[str, str]) -> float:
    """Share of the gold passages whose whole (normalised) text is in ``context``."""
    if not keys:
        return 0.0
    ctx = _padded(context)
    return sum(k in passages and present(ctx, passages[k]) for k in keys) / len(keys)


def chunk_passage_map(chunks: dict[str, str], docs: dict[str, str]) -> dict[str, str]:
    """chunk id -> passage key: the passage whose document (``"<title>\\n<text>"``; one chunk per passage at
    1,200-token chunks) is the chunk's text, else the same once normalised (``norm``: a few passages differ only
    in punctuation or spacing, so the exact text decides first), else the first document that contains the
    chunk (a passage split into chunks)."""
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
    """(candidate chunks as passage keys, in rank order, None where unmapped; None without candidates),
    the keys of the kept chunks."""
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
    ctx = _padded(context)
    first = {}
    for i, key in enumerate(ranked or []):
        first.setdefault(key, i + 1)
    gold = [{"key": k, "candidate_rank": first.get(k), "kept": None if kept is None else k in kept,
             "in_context": k in passages and present(ctx, passages[k])} for k in q["gold"]]
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
    """Per question id: the largest ``total_allowed`` any passage-carrying mode got, and that mode (the most
    generous same allowance for BM25); questions no such mode answered get ``(budget, None)``."""
    best: dict[str, tuple[int, str | None]] = {}
    for r in records:
        allowed = r.get("allowance") or 0
        if r.get("carries_passages") and allowed > best.get(r["qid"], (0, None))[0]:
            best[r["qid"]] = (allowed, r["mode"])
        else:
            best.setdefault(r["qid"], (0, None))
    return {qid: (allowed, mode) if mode else (budget, None) for qid, (allowed, mode) in best.items()}


def _median(values: list) -> float | None:
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def _share(flags: list) -> float | None:
    """Share of true flags among the known ones (None: none known)."""
    known = [f for f in flags if f is not None]
    return round(sum(known) / len(known), 4) if known else None


def mode_stats(records: list[dict], budget: int) -> dict:
    """One mode's questions: mean recall, the answer-in-context share (among the questions that count), where
    the gold passages went (share among the candidates, share kept), and medians of tokens, allowance,
    allowance used and time."""
    n = len(records)
    gold = [g for r in records for g in r["gold"]]
    used = [r["total_tokens"] / r["allowance"] for r in records if r.get("allowance") and r.get("total_tokens")
            is not None]
    secs, ms = _median([r.get("seconds") for r in records]), _median([r.get("context_ms") for r in records])
    answers = [r.get("answer_in_context") for r in records]
    return {"questions": n, "recall": round(statistics.mean(r["recall"] for r in records), 4) if n else None,
            "answer_in_context": _share(answers), "answer_questions": sum(a is not None for a in answers),
            "all_gold_share": round(sum(r["recall"] == 1.0 for r in records) / n, 4) if n else None,
            "gold_in_candidates": _share([None if r["candidates"] is None else g["candidate_rank"] is not None
                                          for r in records for g in r["gold"]]),
            "gold_kept": _share([g["kept"] for g in gold]),
            "context_tokens_median": _median([r["context_tokens"] for r in records]),
            "over_budget": sum(r["context_tokens"] > budget for r in records),
            "errors": sum(bool(r.get("error")) for r in records),
            "allowance_median": _median([r.get("allowance") for r in records]),
            "allowance_used_median": round(_median(used), 4) if used else None,
            "seconds_p50": None if secs is None else round(secs, 4),
            "context_ms_p50": None if ms is None else round(ms, 2)}


BASELINES = {  # summary key -> what its allowance is
    "bm25": "largest total_allowed of the passage-carrying graphfleet modes, per question",
    "bm25_full": "the whole budget",
    "hybrid_baseline": "as bm25 (same allowance)",
    "dense": "as bm25 (same allowance)",
}


def set_summary(head: dict, by_mode: dict[str, list[dict]], budget: int, passages: int,
                bm25: list[dict] | None = None, bm25_full: list[dict] | None = None,
                hybrid_baseline: list[dict] | None = None, dense: list[dict] | None = None, **extra) -> dict:
    """``retrieval_set``: ``head`` (set, llm, system) with each mode's stats and, for graphfleet, the baselines'
    (``extra``: further fields, e.g. the baselines' in-process embedding cost)."""
    questions = max((len(v) for v in by_mode.values()), default=len(bm25 or []))
    out = {"bench": "retrieval_set", **head, "questions": questions, "passages": passages, "budget": budget,
           "budget_encoding": "cl100k_base", "modes": {m: mode_stats(rs, budget) for m, rs in by_mode.items()}}
    for name, records in (("bm25", bm25), ("bm25_full", bm25_full), ("hybrid_baseline", hybrid_baseline),
                          ("dense", dense)):
        if records is not None:
            out[name] = {**mode_stats(records, budget), "allowance": BASELINES[name]}
    return {**out, **extra}


def macro_average(summaries: list[dict]) -> dict:
    """``retrieval_macro`` of one (llm, system)'s set summaries: the mean over sets of each recall; a mode
    (or baseline) missing from any set gets None (its mean would cover other questions)."""
    head = {k: summaries[0].get(k) for k in ("run", "llm", "system")} if summaries else {}
    modes = list(dict.fromkeys(m for s in summaries for m in s["modes"]))

    def mean(values: list) -> float | None:
        ok = len(values) == len(summaries) and summaries and all(v is not None for v in values)
        return round(statistics.mean(values), 4) if ok else None

    return {"bench": "retrieval_macro", **head, "sets": [s["set"] for s in summaries],
            "questions": sum(s["questions"] for s in summaries),
            "recall": {m: mean([s["modes"][m]["recall"] for s in summaries if m in s["modes"]]) for m in modes},
            **{b: mean([s[b]["recall"] for s in summaries if s.get(b)]) for b in BASELINES},
            "answer_in_context": {m: mean([s["modes"][m].get("answer_in_context") for s in summaries
                                           if m in s["modes"]]) for m in modes}
            | {b: mean([s[b].get("answer_in_context") for s in summaries if s.get(b)]) for b in BASELINES}}
