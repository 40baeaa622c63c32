"""LLM entity/relation extraction of one chunk with gleaning (pure given a ``chat`` callable).

``chat(messages, stage)`` returns the assistant text; the caller binds the LLM client, its call
context and the model. Stages: ``"extract"`` for the first pass, ``"glean"`` for both the
"continue" and the "should we loop" prompts (as in nano-graphrag).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from shared.domain.extraction.records import combine, parse_records
from shared.domain.models import ExtractionResult
from shared.domain.prompts import extract_entities, glean_continue, glean_loop
from shared.domain.prompts.delimiters import neutralise

ChatFn = Callable[[list[dict], str], str]
DEFAULT_ENTITY_TYPES = ("organization", "person", "geo", "event", "concept")


def build_extract_messages(chunk_text: str, entity_types: Sequence[str]) -> list[dict]:
    """The first-pass user message; the chunk text is neutralised (it is untrusted data)."""
    types = neutralise(", ".join(t.strip() for t in entity_types if t.strip()))
    content = extract_entities.TEMPLATE.format(entity_types=types, input_text=neutralise(chunk_text))
    return [{"role": "user", "content": content}]


def wants_another_round(answer: str) -> bool:
    return answer.strip().strip("\"'`*.").lower().startswith("yes")


def extract_chunk(
    chunk_text: str,
    chunk_id: str,
    doc_id: str,
    chat: ChatFn,
    *,
    entity_types: Sequence[str] = DEFAULT_ENTITY_TYPES,
    max_gleaning: int = 1,
) -> ExtractionResult:
    """First pass, then up to ``max_gleaning`` gleaning rounds; results merged and deduplicated."""
    messages = build_extract_messages(chunk_text, entity_types)
    answer = chat(messages, "extract")
    results = [parse_records(answer, chunk_id, doc_id)]
    warnings = [f"extract: {w}" for w in results[0].warnings]
    for round_no in range(1, max_gleaning + 1):
        messages = [
            *messages,
            {"role": "assistant", "content": answer},
            {"role": "user", "content": glean_continue.TEMPLATE},
        ]
        answer = chat(messages, "glean")
        gleaned = parse_records(answer, chunk_id, doc_id)
        results.append(gleaned)
        warnings += [f"glean {round_no}: {w}" for w in gleaned.warnings]
        if round_no == max_gleaning:
            break
        verdict = chat(
            [*messages, {"role": "assistant", "content": answer}, {"role": "user", "content": glean_loop.TEMPLATE}],
            "glean",
        )
        if not wants_another_round(verdict):
            break
    return combine(
        chunk_id,
        doc_id,
        [e for r in results for e in r.entities],
        [rel for r in results for rel in r.relations],
        warnings,
    )
