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


def answer_in_context(context: str, answers: list[str]) -> bool | None:
    """True when any answer or alias is in the context as whole words (punctuation removed, or made spaces);
    None when the question is left out (its first answer empty, yes or no)."""
    if not answers or normalize(answers[0]) in EXCLUDED:
        return None
    forms = [(f" {normalize(context, punct)} ", punct) for punct in ("", " ")]
    return any(words not in EXCLUDED and f" {words} " in form
               for a in answers for form, punct in forms for words in [normalize(a, punct)])
