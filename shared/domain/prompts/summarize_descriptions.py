"""Summarise the description fragments of one entity or relation."""

MARKER = "-Task- Write one comprehensive description"

TEMPLATE = """-Task- Write one comprehensive description of the entity or relationship below from all of
its description fragments. Resolve contradictions, keep every distinct fact, write in the third
person and include the entity names. Keep it under {max_tokens} tokens.

Entity: {entity_name}
Description fragments:
{description_list}

Output:
"""
