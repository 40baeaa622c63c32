"""Response formatting (nano-graphrag-style): the nine response types, length targets adapted to context
quality, the context quality score, and the post-generation format check + repair message."""

from __future__ import annotations

import re
from collections.abc import Callable

from shared.domain.prompts import format_repair

RESPONSE_TYPES: dict[str, str] = {
    "single_paragraph": "Provide a single, comprehensive paragraph that covers all key points. Use clear, "
    "flowing sentences that connect ideas logically. No lists, no headings.",
    "multiple_paragraphs": "Structure the response in 3-5 well-organized paragraphs separated by blank lines. "
    "Each paragraph focuses on a distinct aspect, with topic sentences and smooth transitions.",
    "bullet_points": "Present the information as organized bullet points: each main point on its own line "
    "starting with '- ', sub-points indented, consistent formatting, 5-10 main bullet points at most.",
    "numbered_list": "Structure the response as a numbered list ('1.', '2.', ...): a clear descriptive "
    "heading for each item, detailed explanation under it, logical ordering, 3-8 items.",
    "executive_summary": "Format as an executive summary: a brief overview paragraph, 'Key Findings' as 3-5 "
    "bullet points ('- '), then recommendations or implications; professional, concise tone; cite sources.",
    "detailed_analysis": "Provide a comprehensive analysis with main sections under Markdown headings "
    "('## ...'), detailed explanations and supporting evidence under each, flowing from general to "
    "specific; cite sources.",
    "comparison": "Structure as a comparison with three bold parts: **Similarities:** (bullets), "
    "**Differences:** (bullets), **Conclusion:** (overall assessment).",
    "timeline": "Present the information chronologically: one line per event or stage, starting with "
    "'- ' and its date, period or step, in order from earliest to latest.",
    "pros_cons": "Present a balanced analysis with three bold parts: **Advantages:** (bullets), "
    "**Disadvantages:** (bullets), **Overall Assessment:** (balanced conclusion).",
}
BASE_WORDS = {
    "single_paragraph": 200, "multiple_paragraphs": 400, "bullet_points": 300, "numbered_list": 350,
    "executive_summary": 300, "detailed_analysis": 600, "comparison": 450, "timeline": 350, "pros_cons": 400,
}
CITING_TYPES = {"detailed_analysis", "executive_summary"}
_BULLET = re.compile(r"^\s*(?:[-*•·‣▪]|\u2022)\s+\S", re.M)
_NUMBERED = re.compile(r"^\s*\d{1,3}[.)]\s+\S", re.M)
_HEADING = re.compile(r"^\s*#{1,6}\s+\S", re.M)
_CITE = re.compile(r"\[(?:Data|Sources?|Reports?|Entities|Relationships)\b[^\]]*\]", re.I)
_DATEISH = re.compile(r"\b(?:1[0-9]{3}|20[0-9]{2})s?\b|\b(?:step|stage|phase|day|week|month|year)\s*\d", re.I)


def normalize_type(response_type: str) -> str:
    key = re.sub(r"[\s\-]+", "_", (response_type or "").strip().lower())
    return key if key in RESPONSE_TYPES else response_type


def target_words(
    response_type: str, context_tokens: int, quality: float = 0.5, complexity: int = 10,
    lo: int = 150, hi: int = 1000,
) -> int:
    """nano-graphrag's response length: base length x context richness (min 1.5, tokens/20000) x complexity
    (min 1.3, n/10); a rich context (quality > 0.7) never gets less than the base; clamped to [lo, hi]."""
    base = BASE_WORDS.get(normalize_type(response_type), 400)
    ctx_mult = min(1.5, context_tokens / 20000)
    cx_mult = min(1.3, max(1, complexity) / 10)
    words = int(base * ctx_mult * cx_mult)
    if quality > 0.7:
        words = max(words, base)
    return max(lo, min(words, hi))


def response_instructions(response_type: str, words: int | None = None) -> str:
    """Formatting block injected into the system prompt; free-text response types pass through."""
    key = normalize_type(response_type)
    text = RESPONSE_TYPES.get(key, response_type or RESPONSE_TYPES["multiple_paragraphs"])
    if words:
        text += f" Aim for about {words} words."
    return text


def assess_context_quality(
    entities: int, relations: int, chunks: int, report_levels: list[int] | None = None
) -> dict:
    """nano-graphrag's context quality score: entity diversity (/20, x0.3), relationship density (/2, x0.3),
    source coverage (/10, x0.2), community depth (/2, x0.2)."""
    density = relations / max(1, entities)
    depth = max(report_levels or [0])
    score = (
        min(entities / 20, 1.0) * 0.3 + min(density / 2, 1.0) * 0.3
        + min(chunks / 10, 1.0) * 0.2 + min(depth / 2, 1.0) * 0.2
    )
    return {
        "score": round(score, 4), "entity_diversity": entities, "relationship_density": round(density, 4),
        "source_coverage": chunks, "community_depth": depth,
    }


def _has_parts(answer: str, *names: str) -> list[str]:
    low = answer.lower()
    return [n for n in names if n.lower() not in low]


def _expect(ok: bool, problem: str) -> list[str]:
    return [] if ok else [problem]


def _paragraphs(text: str) -> list[str]:
    return [p for p in re.split(r"\n\s*\n", text.strip()) if p.strip()]


def _pros_cons_problems(text: str) -> list[str]:
    missing = [] if re.search(r"advantage|pros\b", text, re.I) else ["advantages"]
    missing += [] if re.search(r"disadvantage|cons\b", text, re.I) else ["disadvantages"]
    return [f"missing part '{p}'" for p in missing]


# problems of a non-empty answer with its requested layout, per response type (free text: none)
_LAYOUT_CHECKS: dict[str, Callable[[str], list[str]]] = {
    "bullet_points": lambda t: _expect(len(_BULLET.findall(t)) >= 2,
                                       "expected bullet points (lines starting with '- ' or '•')"),
    "numbered_list": lambda t: _expect(len(_NUMBERED.findall(t)) >= 2, "expected a numbered list ('1.', '2.', ...)"),
    "detailed_analysis": lambda t: _expect(bool(_HEADING.search(t)), "expected section headings ('## ...')"),
    "executive_summary": lambda t: _expect(len(_BULLET.findall(t)) >= 2, "expected key findings as bullet points"),
    "single_paragraph": lambda t: _expect(len(_paragraphs(t)) <= 1 and not _BULLET.findall(t),
                                          "expected a single paragraph without lists"),
    "multiple_paragraphs": lambda t: _expect(len(_paragraphs(t)) >= 2,
                                             "expected several paragraphs separated by blank lines"),
    "comparison": lambda t: [f"missing part '{p}'" for p in _has_parts(t, "similarit", "difference")],
    "pros_cons": _pros_cons_problems,
    "timeline": lambda t: _expect(len(_DATEISH.findall(t)) + len(_NUMBERED.findall(t)) >= 2,
                                  "expected dated or ordered timeline entries"),
}


def check_response_format(answer: str, response_type: str) -> tuple[bool, list[str]]:
    """Does ``answer`` follow its requested type? Returns (ok, problems). Free text always passes."""
    key = normalize_type(response_type)
    text = answer or ""
    if not text.strip():
        return False, ["empty answer"]
    check = _LAYOUT_CHECKS.get(key)
    problems = check(text) if check else []
    if key in CITING_TYPES and not _CITE.search(text):
        problems.append("expected source references like [Data: Entities (E1); Sources (chunk-...)]")
    return not problems, problems


def build_repair_messages(answer: str, response_type: str, problems: list[str]) -> list[dict]:
    system = format_repair.SYSTEM.format(
        response_type=response_instructions(response_type), problems="\n".join(f"- {p}" for p in problems)
    )
    return [{"role": "system", "content": system}, {"role": "user", "content": answer}]
