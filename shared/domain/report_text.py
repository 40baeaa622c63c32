"""A community report's text as markdown (pure, no clustering or LLM import: the gateway's storage reads it)."""

from __future__ import annotations

from collections.abc import Iterable

from shared.domain.models import Finding


def render_markdown(title: str, summary: str, findings: Iterable[Finding]) -> str:
    parts = [f"# {title}", summary]
    parts += [f"## {f.summary}\n\n{f.explanation}".rstrip() for f in findings]
    return "\n\n".join(p for p in parts if p)
