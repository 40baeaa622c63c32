"""Answers for the query-time helper prompts: community rating, answer assessment, map summaries,
and format repair."""

from __future__ import annotations

import json

from . import answers
from .formatting import answer_items, format_answer
from .textutil import content_words, section


def rate_community(system: str, question: str) -> str:
    report = section(system, "-Report-")
    q = set(content_words(question))
    hits = len(q & set(content_words(report)))
    rating = min(5, round(5 * hits / len(q))) if q else 0
    reason = (
        f"The report shares {hits} of {len(q)} key terms with the question."
        if q else "The question has no key terms to match."
    )
    return json.dumps({"rating": rating, "reason": reason})


def assess_answer(user: str) -> str:
    question = section(user, "Question:", ("\n\nAnswer:",)) or user
    answer = section(user, "\n\nAnswer:")
    present = set(content_words(answer))
    missing = [w for w in dict.fromkeys(content_words(question)) if w not in present][:3]
    return json.dumps({"is_complete": not missing, "missing_info": missing})


def map_summarize(system: str, question: str) -> str:
    text = answers.answer("map_summarize", system, question)
    return " ".join(answer_items(text)) if text != answers.DONT_KNOW else text


def format_repair(system: str, answer: str) -> str:
    instruction = section(system, "-Required format-", ("\n-Problems found-",))
    items = answer_items(answer) or [answers.DONT_KNOW]
    return format_answer(items, instruction)
