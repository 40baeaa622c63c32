"""Prompt templates, one per module. Each module defines ``TEMPLATE`` (and ``SYSTEM`` where used),
the delimiters it relies on, and ``MARKER``: a phrase unique to that prompt."""
