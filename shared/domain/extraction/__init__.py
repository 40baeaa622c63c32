"""Entity/relation extraction: robust record parsing, LLM extraction with gleaning, and a
rule-based extractor that needs no LLM."""

from shared.domain.extraction.fast_extractor import extract_chunk_fast, prune_graph
from shared.domain.extraction.llm_extractor import build_extract_messages, extract_chunk
from shared.domain.extraction.records import normalise_name, parse_records

__all__ = [
    "build_extract_messages",
    "extract_chunk",
    "extract_chunk_fast",
    "normalise_name",
    "parse_records",
    "prune_graph",
]
