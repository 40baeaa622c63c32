"""Compact stored forms of communities and community reports.

Fields at their defaults are left out. A community's internal edges are stored as indexes into its member list
(``"e": [i, j, ...]``) instead of repeating both names per edge, and its ``chunk_ids`` are not stored: they are the
union of its members' source ids, needed only to compute ``occurrence`` at clustering (stored). A report's
``full_text`` is left out when it is the markdown of its title, summary and findings (``report_text.render_markdown``,
how every report is made) and rendered again when read. Both are deflated when long (``text_codec``). Records
written before (whole JSON) are still read.
"""

from __future__ import annotations

import json

from shared.domain.models import Community, CommunityReport
from shared.domain.report_text import render_markdown
from shared.infra.redis.text_codec import pack_text, unpack_bytes


def _dumps(value) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def pack_community(community: Community) -> bytes:
    data = community.model_dump(exclude_defaults=True, exclude={"edges", "chunk_ids"})
    index = {name: i for i, name in enumerate(community.nodes)}
    if all(a in index and b in index for a, b in community.edges):
        if community.edges:
            data["e"] = [index[x] for edge in community.edges for x in edge]
    else:
        data["edges"] = community.edges
    return pack_text(_dumps(data))


def unpack_community(raw: bytes | str) -> Community:
    data = json.loads(unpack_bytes(raw))
    flat = data.pop("e", None)
    if flat is not None:
        nodes = data["nodes"]
        data["edges"] = [(nodes[flat[i]], nodes[flat[i + 1]]) for i in range(0, len(flat), 2)]
    return Community.model_validate(data)


def pack_report(report: CommunityReport) -> bytes:
    data = report.model_dump(exclude_defaults=True, exclude={"full_text"})
    if report.full_text != render_markdown(report.title, report.summary, report.findings):
        data["full_text"] = report.full_text
    return pack_text(_dumps(data))


def unpack_report(raw: bytes | str) -> CommunityReport:
    data = json.loads(unpack_bytes(raw))
    report = CommunityReport.model_validate(data)
    if "full_text" not in data:
        report.full_text = render_markdown(report.title, report.summary, report.findings)
    return report
