"""Gleaning: ask for entities missed by the previous pass."""

from shared.domain.prompts.delimiters import COMPLETE, RECORD

MARKER = "MANY entities and relationships were missed in the last extraction"

TEMPLATE = (
    "MANY entities and relationships were missed in the last extraction. "
    f"Add them below using the same format, separated by {RECORD}, ending with {COMPLETE}\n"
)
