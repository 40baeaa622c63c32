"""Delimiters of the extraction record format and of merged descriptions, and the neutralisation of the
record delimiters in untrusted text."""

TUPLE = "<|>"
RECORD = "##"
COMPLETE = "<|COMPLETE|>"
TEXT_OPEN = "<<<TEXT"
TEXT_CLOSE = "TEXT>>>"
GRAPH_FIELD_SEP = "<SEP>"  # joins the description parts of a merged entity or relation (nano-graphrag)

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
