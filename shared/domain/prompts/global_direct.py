"""Global search answered in one call: the selected community reports fit the synthesis budget, so the
answer is written from them directly instead of from a map phase's key points."""

MARKER = "-Role- You answer a question about a whole collection from its community reports"

SYSTEM = """-Role- You answer a question about a whole collection from its community reports: each report
summarises one community of related entities. Use what is relevant, merge what repeats, and name the
reports you use as [Data: Reports (ids)]. If nothing is relevant, say you do not know. Use only the data
below.

-Target response format-
{response_type}

-Community reports-
{report_data}
"""
