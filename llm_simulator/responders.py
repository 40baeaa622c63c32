"""Recognise which project prompt a chat request carries and answer it in the expected format."""

from __future__ import annotations

from dataclasses import dataclass

from shared.domain.prompts import (
    assess_answer,
    causal_analysis,
    causal_summary,
    community_report,
    extract_entities,
    format_repair,
    glean_continue,
    glean_loop,
    global_direct,
    global_map,
    global_reduce,
    keywords,
    map_summarize,
    naive_answer,
    rag_answer,
    rate_community,
    summarize_descriptions,
)

from . import answers, answers_query, peers
from .extraction import extract_records, glean_more, glean_records, render

TYPES = (
    "extract", "glean_continue", "glean_loop", "summarize", "community_report", "global_map",
    "global_reduce", "global_direct", "rag_answer", "naive_answer", "keywords", "causal_analysis", "causal_summary",
    "rate_community", "assess_answer", "map_summarize", "format_repair", *peers.TYPES, "unknown",
)
# Most specific first: gleaning messages follow an extraction prompt in the same conversation.
MARKERS = (
    ("glean_loop", glean_loop.MARKER),
    ("glean_continue", glean_continue.MARKER),
    ("extract", extract_entities.MARKER),
    ("summarize", summarize_descriptions.MARKER),
    ("community_report", community_report.MARKER),
    ("global_map", global_map.MARKER),
    ("global_reduce", global_reduce.MARKER),
    ("global_direct", global_direct.MARKER),
    ("rag_answer", rag_answer.MARKER),
    ("naive_answer", naive_answer.MARKER),
    ("keywords", keywords.MARKER),
    ("causal_analysis", causal_analysis.MARKER),
    ("causal_summary", causal_summary.MARKER),
    ("rate_community", rate_community.MARKER),
    ("assess_answer", assess_answer.MARKER),
    ("map_summarize", map_summarize.MARKER),
    ("format_repair", format_repair.MARKER),
    *peers.MARKERS,  # nano-graphrag's and LightRAG's own prompts (the side-by-side benchmark)
)
# decided by the last user message only: a gleaning message follows an extraction prompt in the conversation
LAST_USER_ONLY = frozenset({"glean_loop", "glean_continue"}) | peers.LAST_USER_ONLY
_QUERY_HELPERS = {
    "rate_community": answers_query.rate_community,
    "map_summarize": answers_query.map_summarize,
    "format_repair": answers_query.format_repair,
}


def content_text(content) -> str:
    """Text of a message content: a string, or a list of parts (``{"type": "text", "text": ...}``)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") if isinstance(p, dict) else str(p) for p in content)
    return str(content)


@dataclass
class Conversation:
    messages: list[tuple[str, str]]  # (role, text)

    @classmethod
    def from_request(cls, messages: list[dict]) -> Conversation:
        return cls([(str(m.get("role", "user")), content_text(m.get("content"))) for m in messages])

    def last_user(self) -> str:
        return next((t for r, t in reversed(self.messages) if r == "user"), "")

    def with_marker(self, marker: str) -> str:
        return next((t for _, t in self.messages if marker in t), "")

    def assistant_texts(self) -> list[str]:
        return [t for r, t in self.messages if r == "assistant"]

    def system(self) -> str:
        return "\n".join(t for r, t in self.messages if r in ("system", "developer"))


def classify(conv: Conversation) -> str:
    last = conv.last_user()
    for kind, marker in MARKERS:
        if marker in last:
            return kind
    for kind, marker in MARKERS:
        if kind not in LAST_USER_ONLY and any(marker in text for _, text in conv.messages):
            return kind
    return "unknown"


def _ingest_answer(kind: str, conv: Conversation, model: str | None) -> str | None:
    """The answer to an ingest-side request (extraction, gleaning, summaries, reports, keywords), or None."""
    if kind == "extract":
        return render(extract_records(conv.with_marker(extract_entities.MARKER)))
    if kind in ("glean_continue", "glean_loop"):
        prompt = conv.with_marker(extract_entities.MARKER)
        if kind == "glean_continue":
            return render(glean_records(prompt, conv.assistant_texts()))
        return "YES" if prompt and glean_more(prompt, conv.assistant_texts()) else "NO"
    if kind == "summarize":
        return answers.summarize(conv.with_marker(summarize_descriptions.MARKER), model)
    if kind == "community_report":
        return answers.community_report(conv.with_marker(community_report.MARKER))
    if kind == "keywords":
        return answers.keywords(conv.with_marker(keywords.MARKER))
    return None


def _query_answer(kind: str, conv: Conversation, json_mode: bool) -> str:
    """The answer to a query-side request (assessment, helpers, global map, answers), or the fallback."""
    marker = dict(MARKERS).get(kind)
    if kind == "assess_answer":
        return answers_query.assess_answer(_question(conv, marker))
    if kind in _QUERY_HELPERS:
        return _QUERY_HELPERS[kind](conv.with_marker(marker), _question(conv, marker))
    if kind == "global_map":
        return answers.global_map(conv.with_marker(marker), _question(conv, marker))
    if marker:
        return answers.answer(kind, conv.with_marker(marker), _question(conv, marker))
    return answers.unknown(conv.last_user(), json_mode)


def respond(kind: str, conv: Conversation, model: str | None, json_mode: bool = False) -> str:
    """The well-formed answer for a request of ``kind``."""
    if kind in peers.TYPES:
        return peers.respond(kind, conv, model)
    answer = _ingest_answer(kind, conv, model)
    return answer if answer is not None else _query_answer(kind, conv, json_mode)


def _question(conv: Conversation, marker: str) -> str:
    """The user's question: the last user message that is not the prompt template itself."""
    return next((t for r, t in reversed(conv.messages) if r == "user" and marker not in t), conv.last_user())
