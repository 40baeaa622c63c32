"""Token budgets: model windows, total and per-section budgets per mode, priority allocation, reports.

All counting uses the query model's real encoding (``shared.domain.tokens``). The total (context-data)
budget is resolved once per query (``TotalBudget``, by the engine) and passed to the context builders.
Allocation fits rows with ``shared.domain.packing`` and checks each section exactly as it will be sent, from
the memoized counts of its lines (``shared.domain.query.line_tokens``), so a budget is never exceeded.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from pydantic import BaseModel

from shared.domain.packing import fit_rows
from shared.domain.query.lazy import BatchedCounts
from shared.domain.query.line_tokens import FENCE, SECTION_SEPARATOR, exact_lines, joined_tokens, line_counts
from shared.domain.query.params import QueryParam
from shared.domain.tokens import count_tokens

# Total context windows (input + output): the windows nano-graphrag's and common RAG budget managers list, plus
# current OpenAI models.
MODEL_CONTEXT_LIMITS: dict[str, int] = {
    "gpt-4": 8192,
    "gpt-4-32k": 32768,
    "gpt-4-turbo": 128000,
    "gpt-4o": 128000,
    "gpt-4o-mini": 128000,
    "gpt-4.1": 1047576,
    "gpt-4.1-mini": 1047576,
    "gpt-4.1-nano": 1047576,
    "gpt-5": 400000,
    "gpt-5-mini": 400000,
    "gpt-5-nano": 400000,
    "o1": 200000,
    "o3": 200000,
    "o3-mini": 200000,
    "o4-mini": 200000,
    "gpt-3.5-turbo": 16385,
    "claude-3": 200000,
    "claude-3-5-sonnet": 200000,
    "claude": 200000,
    "gemini-pro": 1048576,
    "gemini-1.5-pro": 2097152,
    "gemini": 1048576,
}
DEFAULT_CONTEXT_LIMIT = 16385  # unknown models: assume a small window (gpt-3.5-turbo's)
PRIORITY = ("entities", "relationships", "reports", "sources")  # nano-graphrag's overflow order
# budget_split="evidence": passages first, then graph rows in the room they leave (each within its cap)
EVIDENCE_PRIORITY = ("sources", "entities", "relationships", "reports")


def model_context_limit(
    model: str | None, override: int | None = None, table: dict[str, int] | None = None
) -> int:
    """Window of ``model``: per-query override > settings table > built-in table (longest prefix)."""
    if override:
        return override
    limits = {**MODEL_CONTEXT_LIMITS, **(table or {})}
    name = (model or "gpt-4o-mini").lower()
    if name in limits:
        return limits[name]
    best = max((k for k in limits if name.startswith(k)), key=len, default=None)
    return limits[best] if best else DEFAULT_CONTEXT_LIMIT


class SectionReport(BaseModel):
    name: str
    candidates: int = 0
    kept: int = 0
    tokens_used: int = 0
    tokens_allowed: int = 0
    truncated: bool = False
    cut_by: str | None = None  # "section" (own cap) | "total" (overflow, priority) | None
    partial_item: bool = False  # the last kept item was shortened (smart truncation)

    def summary(self) -> str:
        s = f"{self.candidates} {self.name} found, {self.kept} kept ({self.tokens_used}/{self.tokens_allowed} tokens)"
        if self.cut_by:
            s += f", cut by {self.cut_by} budget"
        return s


class BudgetReport(BaseModel):
    mode: str = ""
    model: str = ""
    model_limit: int = 0
    output_reserve: int = 0
    system_prompt_tokens: int = 0
    query_tokens: int = 0
    buffer_tokens: int = 0
    total_allowed: int = 0  # context-data budget
    total_tokens: int = 0  # context-data tokens actually assembled
    sections: list[SectionReport] = []
    truncated_sections: list[str] = []
    summaries: list[str] = []
    notes: list[str] = []

    def section(self, name: str) -> SectionReport | None:
        return next((s for s in self.sections if s.name == name), None)

    def finalize(self) -> BudgetReport:
        self.truncated_sections = [s.name for s in self.sections if s.truncated]
        self.summaries = [s.summary() for s in self.sections]
        return self


@dataclass(frozen=True)
class TotalBudget:
    """The context-data budget of one query: resolved once (the engine does it) and passed to the context
    builders, which only cap or split it."""

    model_limit: int
    total: int  # tokens for context data
    system_prompt_tokens: int
    query_tokens: int
    buffer_tokens: int = 0  # tokens held back (the query's buffer, plus any reserve)
    note: str = ""

    def capped(self, cap: int) -> TotalBudget:
        return replace(self, total=min(self.total, cap))

    def reserving(self, tokens: int) -> TotalBudget:
        """This budget with ``tokens`` more held back (reported as buffer), e.g. for map-reduce summaries."""
        return replace(self, total=max(0, self.total - tokens), buffer_tokens=self.buffer_tokens + tokens)


def total_context_budget(
    param: QueryParam, system_prompt: str = "", query: str | None = None, limits: dict | None = None
) -> TotalBudget:
    """Context-data budget = min(model window - output reserve, max_total_tokens)
    - system prompt - query - buffer (nano-graphrag's model window and LightRAG's total cap together)."""
    model = param.model or "gpt-4o-mini"
    limit = model_context_limit(model, param.model_context_limit, limits)
    sys_t = count_tokens(system_prompt, model) if system_prompt else 0
    q_t = count_tokens(param.query if query is None else query, model)
    window = limit - param.output_reserve
    ceiling = min(window, param.max_total_tokens)
    total = max(0, ceiling - sys_t - q_t - param.buffer_tokens)
    which = "model window - output reserve" if window < param.max_total_tokens else "max_total_tokens"
    return TotalBudget(limit, total, sys_t, q_t, param.buffer_tokens, f"ceiling {ceiling} from {which}")


def section_caps(param: QueryParam, mode: str, total: int) -> dict[str, int | None]:
    """Per-section caps; ``None`` means "whatever the higher-priority sections left"."""
    if mode == "local":
        p = param.local_proportions
        caps: dict[str, int | None] = {
            "entities": int(total * p.entities),
            "relationships": int(total * p.relationships),
            "reports": int(total * p.reports),
            "sources": None if param.local_sources_take_remainder else int(total * p.sources),
        }
        return caps
    if mode in ("hybrid", "lightrag"):
        entities, relations = graph_caps(param, total)
        return {"entities": entities, "relationships": relations, "sources": None}
    if mode == "causal":
        cap = min(param.causal_network_tokens, total)
        sources = cap if _evidence(param) else int(cap * 0.2)  # evidence: text units may take the network cap
        return {"entities": int(cap * 0.4), "relationships": int(cap * 0.4), "sources": sources}
    if mode == "global":
        return {"reports": min(param.global_group_tokens, total)}
    return {"sources": None}  # naive: the whole remainder for chunks


def _evidence(param: QueryParam) -> bool:
    return param.budget_split == "evidence"


# Hybrid: by default the graph sections (entities + relations) take at most this share of the context
# budget, so the chunks' dynamic remainder survives a small max_total_tokens. LightRAG's 6,000 + 8,000
# fit 30,000 with more than half left for chunks, so at the defaults nothing changes; at a 4,000-token
# budget the fixed caps would fill the whole context with graph rows and leave no chunk, and hybrid would find
# almost nothing (docs/benchmarks.md, "Retrieval quality under a token budget").
HYBRID_GRAPH_SHARE = 0.5


def graph_caps(param: QueryParam, total: int) -> tuple[int, int]:
    """(entity cap, relation cap) for hybrid: the caller's explicit values or a preset's as given; the
    defaults scaled down, keeping their ratio, when together they exceed HYBRID_GRAPH_SHARE of ``total``."""
    entities, relations = param.max_entity_tokens, param.max_relation_tokens
    explicit = set(getattr(param, "explicit_fields", None) or param.model_fields_set)
    preset = getattr(param, "applied_preset", "default")
    if explicit & {"max_entity_tokens", "max_relation_tokens"} or preset != "default":
        return entities, relations
    room = int(total * HYBRID_GRAPH_SHARE)
    if entities + relations <= room:
        return entities, relations
    scale = room / (entities + relations)
    return int(entities * scale), int(relations * scale)


def synthesis_budget(param: QueryParam, total: int) -> int:
    """Reduce-step budget: explicit, else nano-graphrag's 12000 for the final context, within the total."""
    return min(param.global_synthesis_tokens or 12000, total)


# ------------------------------------------------------------------ allocation
@dataclass
class Section:
    """One context section: rendered rows (already ordered by relevance) under a title/header."""

    name: str
    rows: Sequence[str]
    title: str = ""
    header: str = ""
    cap: int | None = None
    shrink: Callable[[int, int], str | None] | None = None  # (row index, tokens) -> shorter row
    fill: bool = False  # skip a row that does not fit and try the next ones (fill the budget)
    min_partial: int | None = None  # smallest room worth a shortened row (default: the query's)
    row_tokens: Sequence[int] | None = None  # estimated tokens per row (the fit is checked exactly after)

    def head(self) -> str:
        head = f"-----{self.title or self.name.capitalize()}-----\n```csv\n"
        return head + self.header + "\n" if self.header else head

    def render(self, rows: Sequence[str]) -> str:
        return self.head() + "\n".join(rows) + "\n```" if rows else ""


@dataclass
class Allocation:
    texts: dict[str, str] = field(default_factory=dict)
    kept_rows: dict[str, list[str]] = field(default_factory=dict)
    kept_index: dict[str, list[int]] = field(default_factory=dict)
    reports: list[SectionReport] = field(default_factory=list)
    context: str = ""
    total_tokens: int = 0


FILL_FLOOR = 8  # a filling section stops looking for a row that fits when less room than this is left


def section_tokens(sec: Section, rows: Sequence[str], model: str | None) -> int:
    """Tokens of ``sec.render(rows)``, exactly, from the memoized counts of its lines: the encoder splits text
    into pieces by its pattern and merges tokens only within a piece, and a piece ends at each line break that a
    row follows (``line_tokens.line_splits``), so the rendered section counts as its head, each row with its line break,
    and the closing fence. A row seen by an earlier query of the process costs a lookup, not an encode. Rows of
    another shape, or another encoding, count the rendered text whole (tests/unit/test_row_tokens.py)."""
    if not rows:
        return 0
    if not exact_lines(rows, model):
        return count_tokens(sec.render(rows), model)
    return count_tokens(sec.head(), model) + sum(line_counts(rows, model)) + count_tokens(FENCE, model)


def _row_counts(sec: Section, model: str | None):
    """(index, tokens) of the rows in order, each with its line break, counted in growing batches
    (``lazy.BatchedCounts``): a section that fills after a few rows never encodes the hundreds of candidates
    behind them."""
    counts = sec.row_tokens if sec.row_tokens is not None else BatchedCounts(
        len(sec.rows), lambda start, stop: line_counts(sec.rows[start:stop], model))
    return enumerate(counts)


def fit_section(sec: Section, allowed: int, model: str | None, min_partial: int
                ) -> tuple[list[int], list[str], bool]:
    """Rows whose rendered section fits ``allowed``, in order: the longest prefix, or with ``sec.fill``
    also the later rows that still fit after one was skipped; then the first row left out, shortened
    into the room that is left when that room is worth it."""
    if allowed <= 0 or not sec.rows:
        return [], [], False
    overhead = count_tokens(sec.head(), model) + count_tokens(FENCE, model)
    sep = 1 if sec.row_tokens is not None else 0  # counted rows include their line break; estimates do not
    kept, running, first_out = fit_rows(_row_counts(sec, model), allowed, overhead, sep=sep,
                                        fill_floor=FILL_FLOOR if sec.fill else None)
    texts = {i: sec.rows[i] for i in kept}
    partial = False
    room = allowed - running - 1
    floor = sec.min_partial if sec.min_partial is not None else min_partial
    if first_out is not None and sec.shrink and room >= floor:
        short = sec.shrink(first_out, room)
        if short:
            texts[first_out], partial = short, True
    idx = sorted(texts)
    rows = [texts[i] for i in idx]
    while rows and section_tokens(sec, rows, model) > allowed:  # exact check: estimates may be off
        drop = idx.index(first_out) if partial else len(rows) - 1
        partial = False
        rows.pop(drop)
        idx.pop(drop)
    return idx, rows, partial


def allocate(
    sections: Sequence[Section],
    total: int,
    model: str | None = None,
    render_order: Sequence[str] | None = None,
    min_partial: int = 100,
    stop_on_cut: bool = True,
) -> Allocation:
    """Fill sections in priority order (the order given). Each gets min(cap, what is left). With
    ``stop_on_cut`` a section cut by the *total* stops allocation: lower-priority sections get nothing
    (nano-graphrag's overflow handling); without it they share what the cut section could not use."""
    out = Allocation()
    seps = count_tokens(SECTION_SEPARATOR, model) * max(0, len(sections) - 1)
    remaining = max(0, total - seps)
    stopped = False
    for sec in sections:
        allowed = 0 if stopped else (remaining if sec.cap is None else min(sec.cap, remaining))
        idx, rows, partial = fit_section(sec, allowed, model, min_partial)
        text = sec.render(rows)
        used = section_tokens(sec, rows, model)
        cut_by = None
        if len(idx) < len(sec.rows) or partial:
            cut_by = "section" if sec.cap is not None and sec.cap <= remaining and not stopped else "total"
            if cut_by == "total" and stop_on_cut:
                stopped = True
        remaining -= used
        out.texts[sec.name], out.kept_rows[sec.name], out.kept_index[sec.name] = text, rows, idx
        out.reports.append(
            SectionReport(
                name=sec.name, candidates=len(sec.rows), kept=len(idx), tokens_used=used,
                tokens_allowed=allowed, truncated=cut_by is not None, cut_by=cut_by, partial_item=partial,
            )
        )
    order = list(render_order or [s.name for s in sections])
    _join(out, order, model)
    by_name = {s.name: s for s in sections}
    while out.total_tokens > total:  # joint encoding guard: drop from the lowest-priority section
        victim = next(s for s in reversed(sections) if out.kept_rows[s.name])
        rows = out.kept_rows[victim.name]
        rows.pop()
        out.kept_index[victim.name].pop()
        out.texts[victim.name] = by_name[victim.name].render(rows)
        rep = next(r for r in out.reports if r.name == victim.name)
        rep.kept, rep.truncated, rep.cut_by = len(rows), True, "total"
        rep.tokens_used = section_tokens(by_name[victim.name], rows, model)
        _join(out, order, model)
    return out


def _join(out: Allocation, order: Sequence[str], model: str | None) -> None:
    used = {r.name: r.tokens_used for r in out.reports}
    names = [n for n in order if out.texts.get(n)]
    texts = [out.texts[n] for n in names]
    out.context = SECTION_SEPARATOR.join(texts)
    out.total_tokens = joined_tokens(texts, model, [used[n] for n in names]) if out.context else 0


def make_report(param: QueryParam, mode: str, tb: TotalBudget, alloc: Allocation | None) -> BudgetReport:
    rep = BudgetReport(
        mode=mode, model=param.model or "gpt-4o-mini", model_limit=tb.model_limit,
        output_reserve=param.output_reserve, system_prompt_tokens=tb.system_prompt_tokens,
        query_tokens=tb.query_tokens, buffer_tokens=tb.buffer_tokens, total_allowed=tb.total,
        notes=[tb.note] if tb.note else [],
    )
    if alloc is not None:
        rep.sections = list(alloc.reports)
        rep.total_tokens = alloc.total_tokens
    return rep.finalize()
