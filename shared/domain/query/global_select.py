"""Global mode's relevance selection: which community reports the map phase reads, chosen without
spending LLM tokens on the choice.

The static full scan (nano-graphrag, Microsoft GraphRAG's static global search) sends every report
at or above the query level to the map model, so a question's cost grows with the corpus. Microsoft
GraphRAG's dynamic selection rates reports top-down with an LLM first (``global_selection="dynamic"``
here), which pays for reading every rated report. This selection instead ranks the reports by two
signals the index already has and fuses them by reciprocal rank:

- the report text's BM25 score for the question (what the report says), and
- its community's share of the question's entity hits (the hybrid entity search local mode runs:
  BM25 over names and descriptions fused with embedding cosine), so a report that shares no word
  with the question but holds the entities a real embedding model matches still ranks.

The map then reads question-focused views (title, the summary's sentences and the findings that bear on
the question, each sentence once: Microsoft GraphRAG's ``use_community_summary`` made question-aware), best
first, in groups of a handful, until the relevant reports end or the allowance (a share of the full scan's
tokens, with a floor) is spent.
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from collections.abc import Sequence

from pydantic import BaseModel

from shared.domain.models import Community, CommunityReport
from shared.domain.query.context_local import report_text
from shared.domain.retrieval.bm25 import BM25Index, tokenize
from shared.domain.tokens import count_tokens, truncate_text

RRF_K = 60  # the usual reciprocal-rank-fusion constant (Cormack et al. 2009), as in shared/domain/retrieval


class RelevanceSelection(BaseModel):
    strategy: str  # "all" | "relevance" | "dynamic"
    candidates: int = 0  # reports at or above the query level
    relevant: int = 0  # of which the question touches (lexically or through its entity hits)
    read: int = 0  # of which the map reads
    allowance: int = 0  # report tokens the map may read
    full_scan_tokens: int = 0  # report tokens of the full scan
    selected_tokens: int = 0  # report tokens the map reads (focused views)


def anchor_scores(communities: dict[str, Community], entity_hits: Sequence[tuple[str, float]]) -> dict[str, float]:
    """Community id -> the summed reciprocal ranks of the question's entity hits among its members."""
    rank = {name: i for i, (name, _score) in enumerate(entity_hits)}
    out: dict[str, float] = {}
    for c in communities.values():
        score = sum(1.0 / (RRF_K + 1 + rank[n]) for n in c.nodes if n in rank)
        if score > 0:
            out[c.id] = score
    return out


def _ranks(scores: dict[str, float]) -> dict[str, int]:
    return {cid: i for i, cid in enumerate(sorted(scores, key=lambda c: (-scores[c], c)))}


_INDEXES: OrderedDict[tuple, BM25Index] = OrderedDict()  # the last few report sets' BM25 indexes
_INDEXES_KEPT = 8
_LOCK = threading.Lock()


def report_index(reports: Sequence[CommunityReport]) -> BM25Index:
    """BM25 over the reports' text, in their order; built once per report set (keyed by each report's id,
    signature and text lengths: a new clustering or report changes the key), so a tenant's global questions
    after the first rank without re-indexing thousands of reports."""
    key = tuple((r.community_id, r.signature, len(r.summary), len(r.full_text), len(r.findings)) for r in reports)
    with _LOCK:
        index = _INDEXES.get(key)
        if index is not None:
            _INDEXES.move_to_end(key)
            return index
    index = BM25Index([r.community_id for r in reports], [report_text(r) for r in reports])
    with _LOCK:
        _INDEXES[key] = index
        while len(_INDEXES) > _INDEXES_KEPT:
            _INDEXES.popitem(last=False)
    return index


def rank_reports(query: str, reports: Sequence[CommunityReport], anchors: dict[str, float] | None = None
                 ) -> list[tuple[CommunityReport, float]]:
    """The reports the question touches, best first: RRF of the BM25 rank of their text and the rank of
    their community's entity hits. A report with neither signal is left out."""
    lexical: dict[str, float] = {}
    if reports and tokenize(query):
        scores = report_index(reports).scores(query)
        lexical = {r.community_id: float(s) for r, s in zip(reports, scores, strict=True) if s > 0}
    anchored = {cid: s for cid, s in (anchors or {}).items() if s > 0}
    by_lex, by_anchor = _ranks(lexical), _ranks(anchored)
    fused: list[tuple[CommunityReport, float]] = []
    for r in reports:
        cid = r.community_id
        score = sum(1.0 / (RRF_K + 1 + ranks[cid]) for ranks in (by_lex, by_anchor) if cid in ranks)
        if score > 0:
            fused.append((r, score))
    fused.sort(key=lambda rs: (-rs[1], rs[0].community_id))
    return fused


def _units(rep: CommunityReport) -> tuple[str, list[tuple[str, str]]]:
    """(header, body units as (label, text)): the findings when the report has them, else the lines of its text."""
    if rep.findings:
        header = "\n".join(p for p in (f"# {rep.title}", rep.summary) if p)
        return header, [(f.summary, f.explanation) for f in rep.findings]
    lines = [ln for ln in report_text(rep).splitlines() if ln.strip()]
    return (lines[0] if lines else ""), [(ln, "") for ln in lines[1:]]


_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def _said(text: str) -> str:
    return " ".join(text.split()).lower()


def _fresh_line(label: str, text: str, said: str) -> str:
    """A unit as a view line without the sentences the view already holds (a finding that repeats the summary,
    findings sharing one description): ``- label: new sentences``, ``- label`` when only the label is new,
    '' when the unit adds nothing."""
    fresh = [s for s in _SENTENCE_END.split(text.strip()) if s and _said(s).rstrip(".") not in said]
    if fresh:
        return f"- {label}: {' '.join(fresh)}" if label else "- " + " ".join(fresh)
    return "" if _said(label) in said else (f"- {label}" if text else label)


def _focused_header(rep: CommunityReport, terms: set[str]) -> str:
    """The title, then the summary's sentences that share a word with the question."""
    bearing = [t for t in _SENTENCE_END.split(rep.summary) if terms & set(tokenize(t))]
    return "\n".join([f"# {rep.title}", " ".join(bearing)]) if bearing else f"# {rep.title}"


def focused_view(rep: CommunityReport, query: str, cap: int, model: str | None = None) -> CommunityReport:
    """The report as the map reads it under selection: its title and summary, then its findings (or lines), each
    without the sentences the view already holds. A report within ``cap`` keeps every finding in its order; a
    longer one keeps the summary's sentences and the findings that share words with the question (most shared
    first) while the view stays within ``cap`` tokens."""
    full = report_text(rep)
    whole = count_tokens(full, model) <= cap
    header, units = _units(rep)
    order = range(len(units))
    if not whole:
        terms = set(tokenize(query))
        overlap = [len(terms & set(tokenize(f"{label} {text}"))) for label, text in units]
        order = [i for i in sorted(order, key=lambda i: (-overlap[i], i)) if overlap[i] > 0]
        header = _focused_header(rep, terms) if rep.findings else header
    kept = [header] if header else []
    said = _said(header)
    used = count_tokens(header, model) if header else 0
    for i in order:
        line = _fresh_line(*units[i], said)
        cost = count_tokens(line, model) + 1 if line else 0
        if not line or used + cost > cap:
            continue
        kept.append(line)
        said += " " + _said(line)
        used += cost
    text = truncate_text("\n".join(kept), cap, model)
    if whole and count_tokens(text, model) >= count_tokens(full, model):
        return rep  # nothing repeated: the report as written
    return rep.model_copy(update={"full_text": text})


def select_by_relevance(
    query: str, reports: Sequence[CommunityReport], anchors: dict[str, float] | None, allowance: int,
    view_tokens: int, model: str | None = None,
) -> tuple[list[CommunityReport], int, int]:
    """Focused views of the touched reports, best first, while they fit ``allowance`` (one that does not
    fit is skipped for the next that does); when the question touches none, the reports in the caller's
    order (the static scan's: by importance). Returns (views, reports touched, tokens of the views)."""
    ranked = rank_reports(query, reports, anchors)
    touched = len(ranked)
    if not ranked:  # nothing touches the question ("what are the main themes?"): the most important communities
        ranked = [(r, 0.0) for r in reports]
    chosen: list[CommunityReport] = []
    used = 0
    for rep, _score in ranked:
        if allowance - used < 32:  # not even a title fits any more
            break
        view = focused_view(rep, query, view_tokens, model)
        cost = count_tokens(report_text(view), model)
        if used + cost > allowance:
            continue
        chosen.append(view)
        used += cost
    return chosen, touched, used
