"""Tolerant parsing of the data tables a prompt carries (CSV sections, or plain lines)."""

from __future__ import annotations

import csv
import io
import re

_HEADER = re.compile(r"^\s*(?:-{2,}|#{1,6})\s*([A-Za-z][A-Za-z _]*?)\s*-*\s*$")
_FENCE = re.compile(r"^\s*```")


def split_sections(text: str) -> dict[str, str]:
    """Map lower-cased section names (``-----Entities-----``, ``## Reports``) to their bodies. A line inside
    a quoted CSV cell (a report's ``# title`` or ``## finding`` lines) is never a header; a code fence
    ends any open quote (nano-graphrag does not escape quotes inside its cells)."""
    sections: dict[str, list[str]] = {}
    name = ""
    in_quote = False
    for line in text.splitlines():
        if _FENCE.match(line):
            in_quote = False
            continue
        m = None if in_quote else _HEADER.match(line)
        if m and not line.strip().startswith("---,"):
            name = m.group(1).strip().lower()
            sections.setdefault(name, [])
            continue
        sections.setdefault(name, []).append(line)
        if line.count('"') % 2:  # doubled quotes inside a cell are even: only cell boundaries flip it
            in_quote = not in_quote
    return {k: "\n".join(v).strip() for k, v in sections.items() if "\n".join(v).strip()}


def parse_rows(body: str) -> list[dict[str, str]]:
    """Rows of a CSV table with a header line (comma or tab separated); plain lines otherwise."""
    lines = [ln for ln in body.splitlines() if ln.strip()]
    if not lines:
        return []
    if ",\t" in lines[0]:  # nano-graphrag's tables: quoted cells joined by ",\t"
        lines = [ln.replace(",\t", ",") for ln in lines]
    delimiter = "\t" if lines[0].count("\t") >= 1 and lines[0].count("\t") >= lines[0].count(",") else ","
    try:
        rows = list(csv.reader(io.StringIO("\n".join(lines)), delimiter=delimiter, skipinitialspace=True))
    except csv.Error:
        rows = []
    if len(rows) >= 2 and len(rows[0]) >= 2:
        header = [h.strip().lower() for h in rows[0]]
        return [{h: (v or "").strip() for h, v in zip(header, row, strict=False)} for row in rows[1:] if row]
    return [{"content": ln.strip()} for ln in lines]


def tables(text: str) -> dict[str, list[dict[str, str]]]:
    return {name: parse_rows(body) for name, body in split_sections(text).items()}


def pick(row: dict[str, str], *names: str) -> str:
    for n in names:
        if row.get(n):
            return row[n]
    return ""


def find_table(parsed: dict[str, list[dict[str, str]]], *words: str) -> list[dict[str, str]]:
    for name, rows in parsed.items():
        if any(w in name for w in words):
            return rows
    return []


def row_text(row: dict[str, str]) -> str:
    return " ".join(v for k, v in row.items() if k not in ("id", "rank", "weight", "degree", "rating") and v)
