"""Gleaning: ask whether another pass is needed."""

MARKER = "Answer YES or NO if there are still entities"

TEMPLATE = (
    "It appears some entities or relationships may still have been missed. "
    "Answer YES or NO if there are still entities or relationships that need to be added. "
    "Answer with one word."
)
