"""Small LLM steps around the context: keywords (hybrid), report rating (dynamic selection),
completeness assessment (refinement), group summaries (map-reduce). Each has an offline fallback."""

from __future__ import annotations

import json
import re
from collections.abc import Callable

from shared.domain.models import CommunityReport
from shared.domain.prompts import assess_answer, keywords, map_summarize, rate_community
from shared.domain.query.context_local import report_text
from shared.domain.retrieval.bm25 import tokenize

Meter = Callable[[list[dict], str], str]


def _json_obj(text: str) -> dict:
    if not text:
        return {}
    start, end = text.find("{"), text.rfind("}")
    if 0 <= start < end:
        try:
            obj = json.loads(text[start : end + 1])
            return obj if isinstance(obj, dict) else {}
        except json.JSONDecodeError:
            return {}
    return {}


def fallback_keywords(query: str) -> tuple[list[str], list[str]]:
    """(high-level, low-level) without an LLM: the whole query as the theme, its content words as entities."""
    terms = list(dict.fromkeys(tokenize(query)))
    return [query], terms


def extract_keywords(query: str, meter: Meter | None) -> tuple[list[str], list[str], str]:
    """(high-level, low-level, how) — how is "llm" or "fallback"."""
    if meter is not None:
        try:
            obj = _json_obj(meter([{"role": "user", "content": keywords.TEMPLATE.format(query=query)}],
                                  "keywords"))
        except Exception:  # noqa: BLE001 - keywords are an optimisation; fall back
            obj = {}
        hl = [str(k) for k in obj.get("high_level_keywords", []) if str(k).strip()]
        ll = [str(k) for k in obj.get("low_level_keywords", []) if str(k).strip()]
        if hl or ll:
            return hl or [query], ll or fallback_keywords(query)[1], "llm"
    hl, ll = fallback_keywords(query)
    return hl, ll, "fallback"


def llm_rater(query: str, meter: Meter) -> Callable[[CommunityReport], float]:
    def rate(rep: CommunityReport) -> float:
        msgs = [{"role": "system", "content": rate_community.SYSTEM.format(report=report_text(rep))},
                {"role": "user", "content": query}]
        try:
            text = meter(msgs, "rate")
        except Exception:  # noqa: BLE001 - an unrated report is kept (never lose data silently)
            return 5.0
        obj = _json_obj(text)
        value = obj.get("rating")
        if value is None:
            m = re.search(r"\d+(?:\.\d+)?", text or "")
            value = m.group(0) if m else 0
        try:
            return float(value)
        except (TypeError, ValueError):
            return 0.0
    return rate


def llm_assess(meter: Meter) -> Callable[[str, str], tuple[bool, list[str]]]:
    def assess(query: str, answer: str) -> tuple[bool, list[str]]:
        msgs = [{"role": "system", "content": assess_answer.SYSTEM},
                {"role": "user", "content": f"Question: {query}\n\nAnswer: {answer}"}]
        obj = _json_obj(meter(msgs, "refine"))
        missing = [str(m) for m in obj.get("missing_info", []) if str(m).strip()]
        return bool(obj.get("is_complete", not missing)), missing
    return assess


def llm_summarizer(meter: Meter) -> Callable[[str, list[str]], str]:
    def summarize(query: str, texts: list[str]) -> str:
        msgs = [{"role": "system", "content": map_summarize.SYSTEM.format(content_data="\n\n".join(texts))},
                {"role": "user", "content": query}]
        return meter(msgs, "summarize")
    return summarize
