"""When a community's report may stand for it after the community changed (pure).

A report keeps, beside its text, a *basis*: a bottom-k sketch of the members and links it was written from and the
size of their descriptions then. A later clustering may hand that report to a community whose own input differs
(new members, a member's new description, or, after a whole-graph Leiden, new community ids over mostly the same
members) as long as the two member-and-link sets overlap by at least ``1 - max_drift`` (Jaccard) and the members'
and links' descriptions have grown by at most ``max_text_growth`` since. The drift is always measured from what the
report was written from, never from the last community that reused it, so reuse does not let a report wander.

An incremental clustering first asks ``stands_unread``: the members and links are known without reading their rows,
and the community keeps an upper bound of its description characters (``Community.input_chars_max``: exact when
its rows were last read, then grown by what the merges counted its changed members and links to add, and by the
whole descriptions of those new to it), so a report that stands by that bound stands by the exact measure too, and
the community's rows need not be read.

The sketch (Broder's bottom-k MinHash) keeps the ``SKETCH_SIZE`` smallest 32-bit hashes of the set: exact for sets
of at most that many items (most communities), an estimate for larger ones (standard error about
``sqrt(J (1 - J) / SKETCH_SIZE)``).
"""

from __future__ import annotations

import base64
import hashlib
from array import array
from collections import Counter
from collections.abc import Iterable, Mapping

from shared.domain.clustering import find_relation
from shared.domain.models import Community, CommunityReport, Entity, Relation

SKETCH_SIZE = 32


def _items(community: Community) -> set[str]:
    """The members and links a report is written from: entity names, and each link as its sorted pair."""
    return set(community.nodes) | {"\x1f".join(sorted(e)) for e in community.edges}


def _hashes(items: Iterable[str]) -> list[int]:
    return sorted({int.from_bytes(hashlib.blake2b(x.encode(), digest_size=4).digest(), "little") for x in items})


def sketch(community: Community) -> str:
    """The bottom-k sketch of ``community``'s members and links, as text (base64 of little-endian uint32s)."""
    return base64.b64encode(array("I", _hashes(_items(community))[:SKETCH_SIZE]).tobytes()).decode()


def _unsketch(text: str) -> list[int]:
    values = array("I")
    values.frombytes(base64.b64decode(text))
    return sorted(values)


def overlap(basis: str, community: Community) -> float:
    """Estimated Jaccard similarity of the set a sketch was taken from and ``community``'s members and links."""
    a, b = set(_unsketch(basis)), set(_hashes(_items(community))[:SKETCH_SIZE])
    union = sorted(a | b)[:SKETCH_SIZE]
    return sum(1 for h in union if h in a and h in b) / len(union) if union else 1.0


def input_chars(community: Community, entities: Mapping[str, Entity],
                relations: Mapping[tuple[str, str], Relation]) -> int:
    """Characters of description the report of ``community`` reads: its members' and its links'."""
    chars = sum(len(entities[n].description) for n in community.nodes if n in entities)
    for a, b in community.edges:
        rel = find_relation(relations, a, b)
        chars += len(rel.description) if rel else 0
    return chars


def with_basis(report: CommunityReport, community: Community, entities: Mapping[str, Entity],
               relations: Mapping[tuple[str, str], Relation]) -> CommunityReport:
    """``report`` with the basis of the input it was written from (in place; returned for chaining)."""
    report.basis = sketch(community)
    report.basis_chars = input_chars(community, entities, relations)
    return report


def may_stand_for(report: CommunityReport | None, community: Community, entities: Mapping[str, Entity],
                  relations: Mapping[tuple[str, str], Relation], max_drift: float, max_text_growth: float) -> bool:
    """Whether ``report`` may be used as ``community``'s: it has a signature and a basis, and the community's input
    is within the drift bounds of that basis."""
    if report is None or not report.signature or not report.basis or max_drift <= 0:
        return False
    if overlap(report.basis, community) < 1.0 - max_drift:
        return False
    return input_chars(community, entities, relations) <= report.basis_chars * (1.0 + max_text_growth)


def stands_unread(report: CommunityReport | None, community: Community, grown_chars: int, max_drift: float,
                  max_text_growth: float) -> bool:
    """Whether ``report`` may stand for ``community`` by ``may_stand_for``'s bounds without the community's rows: its
    members and links are known, and its description characters are at most the ``input_chars_max`` it was saved
    with plus ``grown_chars`` (at least what its new and changed members and links added since). False decides
    nothing: the caller reads the rows and asks ``may_stand_for``."""
    if report is None or not report.signature or not report.basis or max_drift <= 0:
        return False
    if not community.input_chars_max or overlap(report.basis, community) < 1.0 - max_drift:
        return False
    return community.input_chars_max + grown_chars <= report.basis_chars * (1.0 + max_text_growth)


def inherit_reports(communities: Iterable[Community], candidates: Mapping[str, CommunityReport | None],
                    entities: Mapping[str, Entity], relations: Mapping[tuple[str, str], Relation],
                    max_drift: float, max_text_growth: float) -> int:
    """Give each community whose candidate report (``candidates``: community id -> report) may stand for it that
    report's signature, so the report stage reuses the report instead of asking for a new one. In place; returns
    how many communities took one."""
    taken = 0
    for community in communities:
        report = candidates.get(community.id)
        if report is not None and report.signature != community.signature and may_stand_for(
                report, community, entities, relations, max_drift, max_text_growth):
            community.signature = report.signature
            taken += 1
    return taken


def closest_former(communities: Iterable[Community], former: Iterable[Community]) -> dict[str, str]:
    """New community id -> the id of the former community of the same level that shares most members with it (ties:
    the smaller id), for communities sharing any; a whole-graph Leiden numbers its communities afresh."""
    where: dict[tuple[int, str], str] = {}
    for old in former:
        for name in old.nodes:
            where[(old.level, name)] = old.id
    closest: dict[str, str] = {}
    for community in communities:
        counts = Counter(where[(community.level, n)] for n in community.nodes if (community.level, n) in where)
        if counts:
            closest[community.id] = min(counts, key=lambda cid: (-counts[cid], cid))
    return closest
