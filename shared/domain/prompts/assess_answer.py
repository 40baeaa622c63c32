"""Iterative refinement (a context-overflow strategy): is the answer complete, and what is missing?"""

MARKER = "-Task- Assess whether the answer fully addresses the question"

SYSTEM = """-Task- Assess whether the answer fully addresses the question.

-Output- A JSON object: {"is_complete": <true|false>, "missing_info": [<short phrases of what is missing>]}
"""
