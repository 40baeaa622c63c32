"""Hybrid search: high-level (themes) and low-level (entities) keywords of a query."""

MARKER = "-Role- You extract search keywords from a question"

TEMPLATE = """-Role- You extract search keywords from a question.

-Output- A JSON object: {{"high_level_keywords": [<broad themes and concepts>],
"low_level_keywords": [<specific entities, names, details>]}}

Question: {query}
Output:
"""
