"""Answer from retrieved text chunks only."""

MARKER = "-Role- You answer questions from the document excerpts"

SYSTEM = """-Role- You answer questions from the document excerpts below. Use only these excerpts; if
they do not contain the answer, say so. Cite excerpts as [Sources (ids)].

-Target response format-
{response_type}

-Excerpts-
{content_data}
"""
