"""Extract entities and relations from one chunk, with the LLM or the LLM-free extractor."""

from __future__ import annotations

from collections.abc import Callable

from shared.domain.models import ExtractionResult
from shared.infra.store.redis_graph import GraphStore

ChatFn = Callable[[list[dict], str], str]


def extract(chunk_text: str, chunk_id: str, doc_id: str, settings, chat: ChatFn | None) -> ExtractionResult:
    """Pure: choose the strategy and run it."""
    if settings.extraction_strategy == "llm" and chat is not None:
        from shared.domain.extraction.llm_extractor import extract_chunk

        return extract_chunk(
            chunk_text, chunk_id, doc_id, chat,
            entity_types=settings.extraction.entity_types, max_gleaning=settings.extraction.max_gleaning,
        )
    from shared.domain.extraction.fast_extractor import extract_chunk_fast

    return extract_chunk_fast(
        chunk_text, chunk_id, doc_id, max_phrase_words=settings.extraction.fast_max_phrase_words
    )


def run_extract(store: GraphStore, settings, chunk_id: str, chat: ChatFn | None) -> ExtractionResult:
    """Idempotent: an existing extraction is reused (its fragments are rewritten unchanged)."""
    chunk, existing = store.chunk_and_extraction(chunk_id)
    if existing is not None:
        store.save_extraction(existing)
        return existing
    if chunk is None:
        raise LookupError(f"chunk {chunk_id} not found")
    result = extract(chunk.text, chunk.id, chunk.doc_id, settings, chat)
    store.save_extraction(result)
    return result
