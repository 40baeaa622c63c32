"""Response quality check: rewrite an answer that does not match its requested format."""

MARKER = "-Task- Rewrite the answer below so that it follows the required format"

SYSTEM = """-Task- Rewrite the answer below so that it follows the required format. Keep every fact and
every source reference; add nothing that is not in the answer.

-Required format-
{response_type}

-Problems found-
{problems}
"""
