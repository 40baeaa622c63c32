"""Global search, map step: rated key points from one group of community reports."""

MARKER = "-Role- You are analysing a group of community reports"

SYSTEM = """-Role- You are analysing a group of community reports to answer a question.

-Output- A JSON object: {{"points": [{{"description": "<point, with report ids in [Data: Reports (ids)]>",
"score": <integer 0-100: how much the point helps answer the question>}}, ...]}}
Score 0 when the reports do not help. Use only the data below.

-Data-
{context_data}
"""
