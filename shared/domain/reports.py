"""Community report prompt, parsing, LLM-free reports and incremental scheduling (pure); the report's input text
is built in ``shared.domain.report_context``."""

from __future__ import annotations

import itertools
import json
import math
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from shared.domain.models import Community, CommunityReport, Entity, Finding, Relation
from shared.domain.prompts.community_report import TEMPLATE
from shared.domain.prompts.delimiters import GRAPH_FIELD_SEP
from shared.domain.report_context import HEADERS, entity_rows, relation_rows, sorted_entities, sorted_relations
from shared.domain.report_text import render_markdown
from shared.domain.tokens import count_tokens_batch, min_tokens


class ReportParseError(ValueError):
    """The model's answer could not be read as a report; ``reason`` says why."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def build_report_messages(context_text: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": TEMPLATE.format(input_text=context_text)}]


def _outermost_object(text: str) -> str:
    start = text.find("{")
    if start < 0:
        raise ReportParseError("no JSON object in the answer")
    depth, in_string, escaped = 0, False, False
    for i in range(start, len(text)):
        ch = text[i]
        if in_string:  # a backslash escapes the next character, an escaped quote included
            escaped, in_string = not escaped and ch == "\\", escaped or ch != '"'
        elif ch == '"':
            in_string = True
        elif ch in "{[":
            depth += 1
        elif ch in "}]":
            depth -= 1
            if depth == 0:
                return text[start : i + 1]
    raise ReportParseError("unterminated JSON object")


_DECODER = json.JSONDecoder(strict=False)


def _load_json(text: str) -> dict[str, Any]:
    fenced = re.search(r"```(?:json|JSON)?\s*(.*?)```", text, re.DOTALL)
    body = fenced.group(1) if fenced and "{" in fenced.group(1) else text
    start = body.find("{")
    if start >= 0:
        try:  # a well-formed object (after any prose) read in C: the scan below walks the text in Python
            return _DECODER.raw_decode(body, start)[0]
        except json.JSONDecodeError:
            pass  # not well-formed: the outermost object's text, then without trailing commas
    raw = _outermost_object(body)
    try:
        data = json.loads(raw, strict=False)
    except json.JSONDecodeError:
        try:
            data = json.loads(re.sub(r",\s*([}\]])", r"\1", raw), strict=False)
        except json.JSONDecodeError as exc:
            raise ReportParseError(f"invalid JSON: {exc.msg} at position {exc.pos}") from exc
    if not isinstance(data, dict):
        raise ReportParseError("JSON answer is not an object")
    return data


def _rating(value: Any) -> float:
    if isinstance(value, bool):
        return 0.0
    if isinstance(value, int | float):
        number = float(value)
    else:
        match = re.search(r"-?\d+(?:\.\d+)?", str(value or ""))
        number = float(match.group()) if match else 0.0
    return 0.0 if math.isnan(number) else min(10.0, max(0.0, number))


def _findings(value: Any) -> list[Finding]:
    items = value if isinstance(value, list) else [value] if value else []
    found: list[Finding] = []
    for item in items:
        if isinstance(item, str) and item.strip():
            found.append(Finding(summary=item.strip()))
        elif isinstance(item, dict):
            summary = str(item.get("summary") or item.get("insight") or item.get("title") or "").strip()
            explanation = str(item.get("explanation") or item.get("details") or "").strip()
            if summary or explanation:
                found.append(Finding(summary=summary or explanation[:80], explanation=explanation))
    return found


def parse_report(text: str, community: Community, signature: str) -> CommunityReport:
    """A report from the model's answer (tolerates fences, prose around the object, trailing commas)."""
    data = _load_json(text or "")
    title = str(data.get("title") or "").strip()
    summary = str(data.get("summary") or "").strip()
    if not title:
        raise ReportParseError("report has no 'title'")
    findings = _findings(data.get("findings"))
    return CommunityReport(
        community_id=community.id,
        level=community.level,
        title=title,
        summary=summary,
        rating=_rating(data.get("rating")),
        rating_explanation=str(data.get("rating_explanation") or "").strip(),
        findings=findings,
        signature=signature,
        generated_by="llm",
        full_text=render_markdown(title, summary, findings),
    )


def _first_sentence(description: str, limit: int = 240) -> str:
    text = " ".join(description.split(GRAPH_FIELD_SEP)[0].split())
    match = re.match(r"(.+?[.!?])(\s|$)", text)
    sentence = match.group(1) if match else text
    return sentence if len(sentence) <= limit else sentence[: limit - 1].rstrip() + "…"


def extractive_rating(n_nodes: int, n_edges: int) -> float:
    """``10 * (0.7 * size + 0.3 * density)``, size = ``min(1, ln(1+n) / ln(101))`` (saturates at
    100 members), density = ``2m / (n(n-1))`` (0 for a single node); rounded to 2 decimals."""
    size = min(1.0, math.log1p(n_nodes) / math.log1p(100))
    density = min(1.0, 2 * n_edges / (n_nodes * (n_nodes - 1))) if n_nodes > 1 else 0.0
    return round(10 * (0.7 * size + 0.3 * density), 2)


def extractive_report(
    community: Community,
    entities: Mapping[str, Entity],
    relations: Mapping[tuple[str, str], Relation],
    sub_reports: Mapping[str, CommunityReport] | None = None,
    signature: str = "",
) -> CommunityReport:
    """Deterministic report without an LLM: title from top-degree members, summary from their
    descriptions' first sentences, findings from the top relations (or top members)."""
    ents = sorted_entities(community, entities)
    rels = sorted_relations(community, relations)
    top = [e.name for e, _ in ents[:3]]
    title = community.id if not top else top[0] if len(top) == 1 else ", ".join(top[:-1]) + " and " + top[-1]
    sentences = [f"{e.name}: {_first_sentence(e.description)}" for e, _ in ents[:5] if e.description.strip()]
    summary = f"Community of {len(ents)} entities and {len(rels)} relationships. " + " ".join(sentences)
    subs = [sub_reports[c].title for c in community.children if sub_reports and c in sub_reports]
    if subs:
        summary += " Sub-communities: " + "; ".join(subs[:5]) + "."
    findings = [
        Finding(summary=f"{r.src} — {r.tgt}", explanation=_first_sentence(r.description, 400))
        for r in rels[:5]
        if r.description.strip()
    ] or [Finding(summary=e.name, explanation=_first_sentence(e.description, 400)) for e, _ in ents[:5]]
    rating = extractive_rating(len(ents), len(rels))
    return CommunityReport(
        community_id=community.id,
        level=community.level,
        title=title,
        summary=summary.strip(),
        rating=rating,
        rating_explanation=f"Extractive rating from size ({len(ents)}) and density of the community.",
        findings=findings,
        signature=signature or community.signature,
        generated_by="extractive",
        full_text=render_markdown(title, summary.strip(), findings),
    )


def report_levels_bottom_up(communities: Iterable[Community]) -> list[int]:
    """Levels deepest first: a community's report may use its children's reports."""
    return sorted({c.level for c in communities}, reverse=True)


def own_rows_fit(community: Community, entities: Mapping[str, Entity],
                 relations: Mapping[tuple[str, str], Relation], max_tokens: int, model: str | None = None) -> bool:
    """Whether ``community``'s own rows (entities + relations, as ``report_context.build_report_context`` writes
    them) fit ``max_tokens`` with room to spare, in which case no sub-report is ever substituted. Two tokens of
    slack per row cover degrees and ranks that change by a digit before the report is written. The rows are
    encoded only when cheap bounds cannot tell: no token is shorter than a byte, and no text has fewer tokens than
    ``tokens.min_tokens`` (its words, roughly); rows are written only until those floors pass the budget, so a
    community of thousands of members costs what its first rows do."""
    room = max_tokens - 3 * (len(community.nodes) + len(community.edges)) - 4  # a row per member and per link
    if room < 0:
        return False
    texts = itertools.chain((HEADERS["entities"], HEADERS["relations"]),
                            entity_rows(sorted_entities(community, entities)),
                            relation_rows(sorted_relations(community, relations)))
    seen: list[str] = []
    size = floor = 0
    for text in texts:
        seen.append(text)
        size += len(text.encode())
        floor += min_tokens(text)
        if floor > room:
            return False
    if size <= room:
        return True
    used = 0
    for start in range(0, len(seen), 256):
        used += sum(count_tokens_batch(seen[start : start + 256], model))
        if used > room:
            return False
    return True


def report_waves(communities: Iterable[Community], independent: Callable[[Community], bool] | None = None
                 ) -> list[list[str]]:
    """Community ids in waves: a community's report goes in wave 0 when it cannot use its children's
    reports (no children, or ``independent(community)``: its own rows fit the report budget, so
    ``report_context.build_report_context`` substitutes no sub-report); otherwise in the wave after its last
    child's. So only reports that really read sub-reports wait, instead of whole levels waiting for
    the deeper ones. Ids sorted per wave."""
    by_id = {c.id: c for c in communities}
    height: dict[str, int] = {}

    def h(cid: str) -> int:
        if cid not in height:
            kids = [k for k in by_id[cid].children if k in by_id]
            free = not kids or (independent is not None and independent(by_id[cid]))
            height[cid] = 0 if free else 1 + max(h(k) for k in kids)
        return height[cid]

    waves: list[list[str]] = []
    for cid in sorted(by_id, key=lambda c: (by_id[c].level, c)):
        k = h(cid)
        waves.extend([] for _ in range(k + 1 - len(waves)))
        waves[k].append(cid)
    return [sorted(w) for w in waves]


def communities_to_regenerate(communities: Iterable[Community], old_signatures: Mapping[str, str]) -> list[str]:
    """Ids whose signature is unknown, empty or changed; deepest level first, then by id."""
    stale = [c for c in communities if not c.signature or old_signatures.get(c.id) != c.signature]
    return [c.id for c in sorted(stale, key=lambda c: (-c.level, c.id))]
