"""Helpers shared by the simulator tests: a server per test, a client call, its /stats, the parse of its records."""

from __future__ import annotations

import httpx

from shared.domain.prompts import (
    extract_entities,
)
from shared.domain.prompts.delimiters import COMPLETE, RECORD, TUPLE
from shared.domain.tokens import count_tokens

MODEL = "gpt-4o-mini"
TEXT = (
    "Ebenezer Scrooge kept a counting-house in London. Bob Cratchit worked for Ebenezer Scrooge as a clerk. "
    "On Christmas Eve, Bob Cratchit went home to Camden Town. Jacob Marley had been the partner of "
    "Ebenezer Scrooge for many years. The ghost of Jacob Marley visited Ebenezer Scrooge in London. "
    "Fred, the nephew of Ebenezer Scrooge, invited him to dinner. The counting-house was cold and the "
    "fire was small. The counting-house stood in a narrow court, and the clerk shivered."
)




def stats(url: str) -> dict:
    return httpx.get(url.removesuffix("/v1") + "/stats").json()


def extract_prompt(text: str = TEXT) -> str:
    return extract_entities.TEMPLATE.format(entity_types="organization, person, geo, event", input_text=text)


def chat(client, messages, **kwargs):
    if isinstance(messages, str):
        messages = [{"role": "user", "content": messages}]
    return client.chat.completions.create(model=MODEL, messages=messages, **kwargs)


def parse_records(answer: str) -> list[list[str]]:
    """Strict parse of the record format; raises ValueError on anything malformed."""
    if not answer.rstrip().endswith(COMPLETE):
        raise ValueError("no completion marker")
    body = answer.rstrip()[: -len(COMPLETE)]
    records = []
    for raw in body.split(RECORD):
        raw = raw.strip()
        if not raw:
            continue
        if not (raw.startswith("(") and raw.endswith(")")):
            raise ValueError(f"bad record {raw!r}")
        fields = raw[1:-1].split(TUPLE)
        expected = {'"entity"': 4, '"relationship"': 6}.get(fields[0])
        if expected != len(fields):
            raise ValueError(f"wrong field count in {raw!r}")
        records.append(fields)
    return records


def expected_prompt_tokens(messages: list[dict]) -> int:
    return sum(count_tokens(m["content"], MODEL) + 4 for m in messages)

