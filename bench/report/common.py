"""What every table of the report uses: the results files, the system names, cells, tables, recorded commands."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from bench.harness.results import ROOT

RESULTS = ROOT / "bench" / "results"
NOTES = Path(__file__).parent / "notes"
SYSTEMS = ("graphfleet", "nano", "lightrag")
NAMES = {"graphfleet": "graphfleet", "nano": "nano-graphrag", "lightrag": "LightRAG"}
SYSTEM_MODES = ("local", "global", "naive", "hybrid", "mix", "causal")
NOT_MEASURED = "not measured"


def note(name: str) -> list[str]:
    """A hand-written part of the page (``bench/report/notes/<name>.md``): a section's heading and how it was
    measured (``*_head``), the reading of the tables before it, or a section whose records no suite writes any
    more, rendered once (``retrieval_peers``: the earlier HotpotQA runs with the peers), or a table's fixed preamble."""
    return [*(NOTES / f"{name}.md").read_text().splitlines(), ""]


def load_results(name: str) -> list[dict]:
    path = RESULTS / name
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []


def newest(rows: list[dict], *keys: str) -> list[dict]:
    """The last row per key (results files are appended to by every run), in first-seen key order."""
    out: dict[tuple, dict] = {}
    for r in rows:
        out[tuple(r.get(k) for k in keys)] = r
    return list(out.values())


def fmt_ratio(ours, theirs) -> str:
    return f"{ours / theirs:.2f}" if ours is not None and theirs else "-"


def fmt(value, spec: str = ".2f") -> str:
    return "-" if value is None else format(value, spec)


def no_results(command: str) -> list[str]:
    return [f"(no results yet: `.venv/bin/python -m bench.suites.{command}`)", ""]


def md_row(cells) -> str:
    return "| " + " | ".join(str(c) for c in cells) + " |"


def md_table(head: str | list[str], rows: list[list]) -> list[str]:
    """A markdown table: its header (cells, or one string of cells split at ``|``), rule and rows."""
    cells = [c.strip() for c in head.split("|")] if isinstance(head, str) else head
    return [md_row(cells), "|" + "---|" * len(cells), *(md_row(r) for r in rows)]


@dataclass
class Row:
    """One row of a target table: the figures, their ratio, the target, whether it is met and why not."""

    label: str
    graphfleet: str = NOT_MEASURED
    nano: str = NOT_MEASURED
    ratio: str = "-"
    target: str = ""
    met: bool | None = None  # None: not measured
    gap: str = ""  # why it is unmet, in measured figures


# A suite's recorded command, with the module under its current name (the suites moved to bench.suites and lost
# their _bench / _eval suffixes).
_OLD_MODULE = re.compile(r"(?<![\w.])bench\.(?!suites\b|report\b|harness\b)(\w+?)(?:_bench|_eval)?\b")


def current_command(command: str) -> str:
    return _OLD_MODULE.sub(r"bench.suites.\1", command)
