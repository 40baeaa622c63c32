"""Answer-in-context: a question's gold answer, or one of its aliases, appears in the context as whole words."""

from __future__ import annotations

import re

_PUNCT = re.compile(r"[^\w\s]|_")  # ASCII string.punctuation and every other non-word, non-space character
_ARTICLES = re.compile(r"\b(a|an|the)\b")
EXCLUDED = frozenset({"", "yes", "no"})


def normalize(text: str, punct: str = "") -> str:
    """SQuAD's answer normalisation; ``punct=" "`` turns punctuation into a space instead of removing it."""
    return " ".join(_ARTICLES.sub(" ", _PUNCT.sub(punct, text.lower())).split())


def gold_answers(q: dict) -> list[str]:
    """The record's answer (a string, or a list of them) and its ``answer_aliases`` (MuSiQue), as given."""
    answer, aliases = q.get("answer"), q.get("answer_aliases") or []
    answers = answer if isinstance(answer, list) else [answer]
    return [a for a in (*answers, *aliases) if isinstance(a, str)]


def countable(answers: list[str]) -> bool:
    """The question counts: its (first) answer is neither empty nor yes/no."""
    return bool(answers) and normalize(answers[0]) not in EXCLUDED


class Context:
    """A context normalised both ways once, for matching several answers."""

    def __init__(self, text: str):
        self.forms = (f" {normalize(text)} ", f" {normalize(text, ' ')} ")

    def has(self, answer: str) -> bool:
        for form, punct in zip(self.forms, ("", " "), strict=True):
            words = normalize(answer, punct)
            if words not in EXCLUDED and f" {words} " in form:
                return True
        return False


def answer_in_context(context: str, answers: list[str]) -> bool | None:
    """True when any answer or alias is in the context as whole words; None when the question is left out."""
    if not countable(answers):
        return None
    ctx = Context(context)
    return any(ctx.has(a) for a in answers)
