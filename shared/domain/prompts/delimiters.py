"""Delimiters of the extraction record format, and their neutralisation in untrusted text."""

TUPLE = "<|>"
RECORD = "##"
COMPLETE = "<|COMPLETE|>"
TEXT_OPEN = "<<<TEXT"
TEXT_CLOSE = "TEXT>>>"

# Document text is untrusted: neutralise sequences that would be read as format markers.
_NEUTRALISE = [
    (COMPLETE, "<|COMPLETE |>"),
    (TUPLE, "< |>"),
    (TEXT_OPEN, "<< <TEXT"),
    (TEXT_CLOSE, "TEXT> >>"),
    (RECORD, "# #"),
]


def neutralise(text: str) -> str:
    for needle, repl in _NEUTRALISE:
        while needle in text:
            text = text.replace(needle, repl)
    return text
