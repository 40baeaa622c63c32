"""Lay out answer items following a response-type instruction (the project's nine types, loosely)."""

from __future__ import annotations

import math
import re

from .textutil import sentences

FILLER = "No further relevant information was found in the data."
_MARKUP = re.compile(r"^\s*(?:[-*•·‣▪]|\d{1,3}[.)]|#{1,6})\s+")
_BOLD_PART = re.compile(r"^\s*\*\*[^*]{1,40}:?\*\*:?\s*")


def response_kind(instruction: str) -> str:
    """Which layout an instruction (or a type key such as ``bullet_points``) asks for."""
    text = instruction.lower().replace("_", " ")
    rules = (
        ("single_paragraph", ("single", "one paragraph")),
        ("comparison", ("comparison", "similarities")),
        ("pros_cons", ("pros cons", "advantages")),
        ("timeline", ("timeline", "chronolog")),
        ("executive_summary", ("executive summary",)),
        ("numbered_list", ("numbered", "ordered list")),
        ("bullet_points", ("bullet", "list")),
        ("detailed_analysis", ("heading", "detailed", "analysis", "report")),
    )
    for kind, needles in rules:
        if any(n in text for n in needles):
            return kind
    return "multiple_paragraphs"


def _pad(items: list[str], n: int) -> list[str]:
    return items + [FILLER] * max(0, n - len(items))


def _bullets(items: list[str]) -> str:
    return "\n".join(f"- {s}" for s in items)


def _halves(items: list[str]) -> tuple[list[str], list[str]]:
    items = _pad(items, 2)
    mid = math.ceil(len(items) / 2)
    return items[:mid], items[mid:]


def _two_sided(names: tuple[str, str, str]):
    """Two bulleted halves under bold names, then a bold conclusion (comparison, pros and cons)."""

    def layout(items: list[str], _title: str) -> str:
        first, second = _halves(items)
        return (
            f"**{names[0]}:**\n{_bullets(first)}\n\n**{names[1]}:**\n{_bullets(second)}\n\n"
            f"**{names[2]}:** {items[0]}"
        )

    return layout


def _executive_summary(items: list[str], _title: str) -> str:
    rest = _pad(items[1:], 2)
    return f"{items[0]}\n\n**Key Findings**\n{_bullets(rest)}\n\n**Implications:** {items[-1]}"


def _detailed_analysis(items: list[str], title: str) -> str:
    parts = [f"## {title}", " ".join(items[:2])]
    if items[2:]:
        parts += ["## Details", _bullets(items[2:])]
    return "\n\n".join(parts)


def _paragraphs(items: list[str], _title: str) -> str:
    items = _pad(items, 2)
    size = max(1, math.ceil(len(items) / 3))
    return "\n\n".join(" ".join(items[i : i + size]) for i in range(0, len(items), size))


_LAYOUTS = {
    "bullet_points": lambda items, _title: _bullets(_pad(items, 2)),
    "numbered_list": lambda items, _title: "\n".join(f"{i}. {s}" for i, s in enumerate(_pad(items, 2), 1)),
    "timeline": lambda items, _title: "\n".join(f"- Step {i}: {s}" for i, s in enumerate(_pad(items, 2), 1)),
    "single_paragraph": lambda items, _title: " ".join(items),
    "comparison": _two_sided(("Similarities", "Differences", "Conclusion")),
    "pros_cons": _two_sided(("Advantages", "Disadvantages", "Overall Assessment")),
    "executive_summary": _executive_summary,
    "detailed_analysis": _detailed_analysis,
}


def format_answer(items: list[str], instruction: str, title: str = "Answer") -> str:
    if not items:
        return ""
    return _LAYOUTS.get(response_kind(instruction), _paragraphs)(items, title)


def answer_items(answer: str) -> list[str]:
    """Sentences of an existing answer without list/heading markup, citations kept with their sentence."""
    items: list[str] = []
    for line in answer.splitlines():
        line = _BOLD_PART.sub("", _MARKUP.sub("", line)).strip()
        if not line or line in ("Key Findings", FILLER) or line.startswith("Step ") and line.endswith(":"):
            continue
        for sent in sentences(line):
            if sent.startswith("[") and items:
                items[-1] += " " + sent
            elif sent not in items:
                items.append(sent)
    return items
