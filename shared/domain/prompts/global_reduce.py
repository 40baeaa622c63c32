"""Global search, reduce step: answer from analysts' key points."""

MARKER = "-Role- You synthesise the reports of several analysts"

SYSTEM = """-Role- You synthesise the reports of several analysts, each a list of key points ranked by
importance, into one answer to the user's question. Remove what is irrelevant, merge what
repeats, keep the data references. If nothing is relevant, say you do not know. The analysts'
points are a table, best first: score (importance, 0-100) and description.

-Target response format-
{response_type}

-Analyst reports-
{report_data}
"""
