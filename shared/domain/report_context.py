"""A community report's input text within a token budget (pure).

Context building follows Microsoft GraphRAG / nano-graphrag: CSV-like ``-----Entities-----`` and
``-----Relationships-----`` sections (entities by degree, relations by rank/weight, descending).
When a community's raw data does not fit the token budget and reports of its children exist, the
children's reports (``-----Reports-----``) are substituted for the members they cover, largest
(then highest-rated) child first, one more child at a time until the rest fits; whatever still
does not fit is cut at row boundaries. The returned text never exceeds ``max_tokens``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

from shared.domain.clustering import find_relation
from shared.domain.models import Community, CommunityReport, Entity, Relation
from shared.domain.packing import csv_row, fit_rows
from shared.domain.prompts.delimiters import GRAPH_FIELD_SEP
from shared.domain.tokens import count_tokens, count_tokens_batch, min_tokens

HEADERS = {
    "reports": "-----Reports-----\nid,title,rating,content",
    "entities": "-----Entities-----\nid,entity,type,description,degree",
    "relations": "-----Relationships-----\nid,source,target,description,rank,weight",
}


def report_row(*cells: object) -> str:
    """A report-input row: text cells on one line, description parts separated by " | ", numbers as they are."""
    return csv_row(
        [" ".join(str(c).replace(GRAPH_FIELD_SEP, " | ").split()) if isinstance(c, str) else c for c in cells],
        float_digits=None,
    )


def sorted_entities(community: Community, entities: Mapping[str, Entity]) -> list[tuple[Entity, int]]:
    """(entity, degree) by degree desc then name; degree falls back to internal edge count."""
    internal: dict[str, int] = {}
    for a, b in community.edges:
        internal[a] = internal.get(a, 0) + 1
        internal[b] = internal.get(b, 0) + 1
    rows = [(entities.get(n) or Entity(name=n), n) for n in community.nodes]
    ranked = [(e, e.degree or internal.get(n, 0)) for e, n in rows]
    return sorted(ranked, key=lambda r: (-r[1], r[0].name))


def sorted_relations(community: Community, relations: Mapping[tuple[str, str], Relation]) -> list[Relation]:
    found = [find_relation(relations, a, b) or Relation(src=a, tgt=b) for a, b in community.edges]
    return sorted(found, key=lambda r: (-r.rank, -r.weight, r.src, r.tgt))


def entity_rows(ents: Iterable[tuple[Entity, int]]) -> Iterator[str]:
    """The entities section's rows of ``sorted_entities``, in order."""
    return (report_row(i, e.name, e.type, e.description, d) for i, (e, d) in enumerate(ents))


def relation_rows(rels: Iterable[Relation]) -> Iterator[str]:
    """The relationships section's rows of ``sorted_relations``, in order."""
    return (report_row(i, r.src, r.tgt, r.description, r.rank, r.weight) for i, r in enumerate(rels))


def _children(
    community: Community, sub_reports: Mapping[str, CommunityReport], sub_communities: Mapping[str, Community] | None
) -> list[tuple[CommunityReport, frozenset[str]]]:
    """(report, covered nodes) of children that have a report: largest, then best-rated first."""
    found = []
    for cid in community.children:
        report = sub_reports.get(cid)
        if report is None:
            continue
        child = (sub_communities or {}).get(cid)
        found.append((report, frozenset(child.nodes) if child else frozenset()))
    return sorted(found, key=lambda x: (-len(x[1]), -x[0].rating, x[0].community_id))


class _Counted:
    """Report-input rows whose token counts are taken when first needed, a block at a time (one batched encode): a
    community of thousands of members has most of its rows cut, and they are never encoded."""

    BLOCK = 64

    def __init__(self, texts: list[str], model: str | None) -> None:
        self.texts, self.model = texts, model
        self.counts: list[int | None] = [None] * len(texts)
        self.floors: list[int | None] = [None] * len(texts)

    def floor(self, i: int) -> int:
        """A floor on row ``i``'s count, found without encoding it (``tokens.min_tokens``)."""
        n = self.floors[i]
        if n is None:
            n = self.floors[i] = min_tokens(self.texts[i])
        return n

    def of(self, indexes: Sequence[int]) -> Iterator[int]:
        """The counts of ``indexes``, in order."""
        for start in range(0, len(indexes), self.BLOCK):
            block = indexes[start : start + self.BLOCK]
            missing = [i for i in block if self.counts[i] is None]
            for i, n in zip(missing, count_tokens_batch([self.texts[i] for i in missing], self.model), strict=True):
                self.counts[i] = n
            yield from (self.counts[i] for i in block)


def _rows_cost(parts: Iterable[tuple[_Counted, Sequence[int]]], limit: int) -> int:
    """Tokens of the rows (each plus its newline), read until they pass ``limit``: exact when at most ``limit``,
    otherwise some figure above it. The rows' floors are summed first: when they pass ``limit``, nothing is
    encoded."""
    parts = list(parts)
    floor = 0
    for counted, indexes in parts:
        for i in indexes:
            floor += counted.floor(i) + 1
            if floor > limit:
                return floor
    total = 0
    for counted, indexes in parts:
        for n in counted.of(indexes):
            total += n + 1
            if total > limit:
                return total
    return total


def _assemble(rows: dict[str, _Counted], keep: dict[str, list[int]], headers: dict[str, int], budget: int):
    """Fill ``budget``: reports first, then entities (at least half of what is left), then relations.

    Estimates each section as header + rows + one newline per row + 2 for the blank line between
    sections; the caller verifies the joined text with a real count.
    """
    kept = dict.fromkeys(HEADERS, 0)
    left = budget
    for key in ("reports", "entities", "relations"):
        room = left - headers[key] - 2
        if key == "entities":  # the relations' need matters only up to where it leaves the entities half
            bound = left - left // 2 - headers["relations"] - 2
            rel_need = headers["relations"] + _rows_cost([(rows["relations"], keep["relations"])], bound) + 2
            room = max(left // 2, left - rel_need) - headers[key] - 2
        if keep[key] and room > 0:
            kept[key] = len(fit_rows(enumerate(rows[key].of(keep[key])), room)[0])
        if kept[key]:
            left -= headers[key] + sum(rows[key].of(keep[key][: kept[key]])) + kept[key] + 2
    sections = ["\n".join([HEADERS[k], *(rows[k].texts[i] for i in keep[k][: kept[k]])])
                for k in ("reports", "entities", "relations") if kept[k]]
    return "\n\n".join(sections), kept


def _reports_taken(rows: dict[str, _Counted], free: dict[str, list[int]], owned: dict[str, list[list[int]]],
                   heads: Callable[[int, dict[str, int]], int], report_head: int, max_tokens: int) -> int:
    """The smallest k whose first k child reports, the rows no child covers (``free``) and the rows of children k..
    (``owned[section][child]``) fit ``max_tokens``; all the children when no k does."""
    sections, n_children = ("entities", "relations"), len(owned["entities"])
    unowned = _rows_cost([(rows[k], free[k]) for k in sections], max_tokens)
    if unowned > max_tokens or not n_children:
        return n_children
    left_at = {n_children: 0}  # k -> tokens of the rows children k.. cover, kept when k reports are taken
    lowest = n_children
    while lowest > 1:
        more = _rows_cost([(rows[k], owned[k][lowest - 1]) for k in sections], max_tokens - unowned - left_at[lowest])
        if unowned + left_at[lowest] + more > max_tokens:
            break
        lowest -= 1
        left_at[lowest] = left_at[lowest + 1] + more
    n_rows = {k: len(free[k]) + sum(len(x) for x in owned[k]) for k in sections}
    reports = 0
    for k, n in enumerate(rows["reports"].of(list(range(n_children))), start=1):
        reports += n + 1
        for key in sections:
            n_rows[key] -= len(owned[key][k - 1])
        if report_head + 2 + reports > max_tokens:
            break  # no more reports fit, whatever else is dropped
        if k >= lowest and heads(k, n_rows) + reports + unowned + left_at[k] <= max_tokens:
            return k
    return n_children


def _substitute(ents: list, rels: list[Relation], children: list, rows: dict[str, _Counted],
                headers: dict[str, int], max_tokens: int) -> dict[str, list[int]]:
    """The rows to keep (indexes per section): every entity and relation when they fit ``max_tokens``; otherwise
    the first k child reports, for the smallest k whose reports and remaining rows fit (all of them when none
    does). Taking child r drops the entities it covers and the relations inside it.

    Rows are counted only as far as a decision needs them: the rows no child covers (when they alone pass the
    budget no k fits), then each child's rows from the last child back (once the rows left at k pass the budget,
    no smaller k fits), then the reports from the first (once they pass it, no larger k fits)."""
    owner = {n: rank for rank, (_, nodes) in enumerate(children) for n in nodes}
    ranks = {"entities": [owner.get(e.name) for e, _ in ents],
             "relations": [owner.get(r.src) if owner.get(r.src) == owner.get(r.tgt) else None for r in rels]}
    every = {"reports": [], "entities": list(range(len(ents))), "relations": list(range(len(rels)))}
    sections = ("entities", "relations")

    def heads(n_reports: int, n_rows: dict[str, int]) -> int:
        return (headers["reports"] + 2 if n_reports else 0) + sum(headers[k] + 2 for k in sections if n_rows[k])

    head = heads(0, {k: len(every[k]) for k in sections})
    if head + _rows_cost([(rows[k], every[k]) for k in sections], max_tokens - head) <= max_tokens:
        return every
    free = {k: [i for i, r in enumerate(ranks[k]) if r is None] for k in sections}
    owned = {k: [[] for _ in children] for k in sections}
    for k in sections:
        for i, r in enumerate(ranks[k]):
            if r is not None:
                owned[k][r].append(i)
    taken = _reports_taken(rows, free, owned, heads, headers["reports"], max_tokens)
    return {"reports": list(range(taken)),
            "entities": [i for i, r in enumerate(ranks["entities"]) if r is None or r >= taken],
            "relations": [i for i, r in enumerate(ranks["relations"]) if r is None or r >= taken]}


def build_report_context(
    community: Community,
    entities: Mapping[str, Entity],
    relations: Mapping[tuple[str, str], Relation],
    sub_reports: Mapping[str, CommunityReport],
    max_tokens: int,
    model: str | None = None,
    *,
    sub_communities: Mapping[str, Community] | None = None,
) -> tuple[str, dict[str, Any]]:
    """Report input text for ``community`` within ``max_tokens`` and a summary of what it holds.

    ``sub_communities`` (child id -> Community) tells which members a child report covers; without
    it, child reports are still put first but no raw rows are dropped in their favour.
    Info keys: reports/entities/relations (rows kept), entities_total, relations_total,
    truncated (some row meant to be included was cut), used_sub_reports, tokens.
    """
    ents = sorted_entities(community, entities)
    rels = sorted_relations(community, relations)
    children = _children(community, sub_reports, sub_communities)
    rows = {
        "reports": [report_row(r.community_id, r.title, r.rating, r.full_text or r.summary) for r, _ in children],
        "entities": list(entity_rows(ents)),
        "relations": list(relation_rows(rels)),
    }
    counted = {key: _Counted(texts, model) for key, texts in rows.items()}
    headers = dict(zip(HEADERS, count_tokens_batch(list(HEADERS.values()), model), strict=True))
    keep = _substitute(ents, rels, children, counted, headers, max_tokens)
    budget = max_tokens
    text, kept = _assemble(counted, keep, headers, budget)
    tokens = count_tokens(text, model) if text else 0
    while tokens > max_tokens:  # BPE can merge across row boundaries: verify and shrink
        budget -= tokens - max_tokens
        text, kept = _assemble(counted, keep, headers, budget)
        tokens = count_tokens(text, model) if text else 0
    info = {
        **kept,
        "entities_total": len(ents),
        "relations_total": len(rels),
        "truncated": any(kept[k] < len(keep[k]) for k in HEADERS),
        "used_sub_reports": kept["reports"] > 0,
        "tokens": tokens,
    }
    return text, info
