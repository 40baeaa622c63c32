"""Deterministically broken answers, for testing the callers' parsers and repair paths."""

from __future__ import annotations

from shared.domain.prompts.delimiters import COMPLETE, RECORD, TUPLE

from .textutil import digest

RECORD_TYPES = ("extract", "glean_continue")
JSON_TYPES = ("community_report", "global_map", "keywords", "rate_community", "assess_answer")
BREAKABLE = RECORD_TYPES + JSON_TYPES + ("glean_loop",)
_GARBAGE = (
    "I'm sorry, I could not process the text. As an AI model I ",
    "entity: ??? relation: ??? <| |> ## (( ",
    "{\"entities\": [\"incomplete",
)


def _truncate(text: str, key: int) -> str:
    """Cut strictly inside the text (never at its end), dropping the completion marker."""
    body = text.replace(COMPLETE, "").rstrip()
    if len(body) < 4:
        return body[:1]
    share = 0.3 + (key % 50) / 100  # 30% .. 79%
    return body[: max(1, int(len(body) * share))]


def _wrong_fields(text: str, key: int) -> str:
    records = [r.strip() for r in text.replace(COMPLETE, "").split(RECORD) if r.strip()]
    broken = []
    for i, rec in enumerate(records):
        fields = rec.split(TUPLE)
        if (i + key) % 2 == 0 and len(fields) > 2:
            fields = fields[:2] + fields[3:] if i % 4 else fields + ["extra field"]
            rec = TUPLE.join(fields)
            if not rec.endswith(")"):
                rec += ")"
        broken.append(rec)
    return (RECORD + "\n").join(broken) + "\n" + COMPLETE


def break_records(text: str, key: int) -> str:
    """Truncated mid-record, missing the completion marker, wrong field counts, or garbage."""
    variant = key % 4
    has_records = RECORD in text or TUPLE in text
    if variant == 0 and has_records:
        return _truncate(text, key)
    if variant == 1 and has_records:
        return text.replace(COMPLETE, "").rstrip()
    if variant == 2 and has_records:
        return _wrong_fields(text, key)
    return _GARBAGE[(key >> 3) % len(_GARBAGE)] + f"#{key % 997}"


def break_json(text: str, key: int) -> str:
    """Output that ``json.loads`` rejects: truncated, chatty, or with single quotes."""
    variant = key % 3
    if variant == 0:
        return _truncate(text, key)
    if variant == 1:
        return "Sure! Here is the JSON you asked for:\n" + _truncate(text, key >> 2)
    return text.replace('"', "'")


def malform(kind: str, text: str, seed_key: str) -> str:
    key = digest("malform-variant", seed_key)
    if kind in RECORD_TYPES:
        return break_records(text, key)
    if kind in JSON_TYPES:
        return break_json(text, key)
    if kind == "glean_loop":
        return "Perhaps, it is hard to say."
    return text
