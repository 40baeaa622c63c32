"""What every suite shares: the repository paths, the Carol and its questions, the flags, JSON lines, the machine."""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT.parent / "shared" / "data"
SAMPLE = ROOT / "graphfleet_cli" / "sample" / "christmas_carol.txt"
PEERS_PYTHON = str(ROOT / ".bench" / "peers-venv" / "bin" / "python")

# Distinct local questions about the Carol: a bench that asks one question again and again measures the
# per-process memo of its context's token counts, not the context build a new question pays.
_CAROL_SUBJECTS = (
    "Ebenezer Scrooge", "Jacob Marley", "Bob Cratchit", "Tiny Tim", "Scrooge's nephew Fred", "Mrs. Cratchit",
    "Mr. Fezziwig", "Belle", "the Ghost of Christmas Past", "the Ghost of Christmas Present",
    "the Ghost of Christmas Yet to Come", "Martha Cratchit", "Peter Cratchit", "Topper", "Dick Wilkins", "Old Joe",
    "Mrs. Dilber", "Fan, Scrooge's sister", "Ignorance and Want", "the portly gentlemen collecting for the poor",
)
_CAROL_TEMPLATES = ("Who is {} and what do they do in the story?", "What happens to {} and why does it matter?")
CAROL_QUESTIONS = tuple(t.format(s) for t in _CAROL_TEMPLATES for s in _CAROL_SUBJECTS)

# One question per query mode about the Carol (the ingest, query and compare suites ask these).
QUERIES = {
    "local": "Who is Ebenezer Scrooge and how does he change?",
    "global": "What are the main themes of the story?",
    "naive": "What happens on Christmas morning?",
    "hybrid": "How is Bob Cratchit related to Scrooge?",
    "causal": "Why does Scrooge change his ways?",
}


def parse_processes(value: str) -> int | str:
    """``--processes``: N or auto (graphfleet's own parser, imported only when a suite's options are parsed)."""
    from graphfleet_cli.stack import parse_processes as parse

    return parse(value)


# the flags several suites share: name -> (type, help)
_FLAGS = {
    "latency": (float, "simulator latency per LLM call, ms"),
    "repeat": (int, "runs per figure (medians)"),
    "concurrency": (int, "LLM calls in flight per system (graphfleet: per worker process)"),
    "processes": (parse_processes, "graphfleet worker processes per queue group, or auto"),
    "ms_per_completion_token": (float, "simulated generation time per completion token (12.5: ~80 tokens/s)"),
    "peers_python": (str, "the peers' interpreter (bash bench/harness/peers/setup.sh)"),
    "corpus": (Path, "the document to ingest"),
}


def carol_question(i: int) -> str:
    """The ``i``-th question of the cycle, marked with ``i`` so that no LLM cache answers a repeat."""
    return f"{CAROL_QUESTIONS[i % len(CAROL_QUESTIONS)]} (run {i})"


def median(values, digits: int | None = None) -> float | None:
    """The median of the known values (None: none known), rounded to ``digits``."""
    values = [v for v in values if v is not None]
    middle = statistics.median(values) if values else None
    return middle if middle is None or digits is None else round(middle, digits)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def timed(fn, *args, **kwargs) -> tuple:
    """(``fn(*args, **kwargs)``, the wall seconds it took)."""
    started = time.perf_counter()
    return fn(*args, **kwargs), time.perf_counter() - started


def parser(doc: str, out: bool = True, **defaults) -> argparse.ArgumentParser:
    """A suite's options: its docstring's first paragraph, the shared flags given a default (a list: several
    values), and ``--out``."""
    ap = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    for name, default in defaults.items():
        kind, help_text = _FLAGS[name]
        ap.add_argument("--" + name.replace("_", "-"), type=kind, nargs="+" if isinstance(default, list) else None,
                        default=default, help=help_text)
    if out:
        ap.add_argument("--out", type=Path, default=None, help="also append the JSON lines to this file")
    return ap


def emit(records: dict | list[dict], out: Path | None = None, echo: bool = True) -> None:
    """JSON lines on stdout (``echo``) and appended to ``out``."""
    lines = [json.dumps(r) + "\n" for r in ([records] if isinstance(records, dict) else records)]
    if echo:
        sys.stdout.writelines(lines)
        sys.stdout.flush()
    if out:
        with out.open("a") as fh:
            fh.writelines(lines)


def machine() -> dict:
    """What the figures were measured on: CPU model and count, memory, kernel, Python."""
    def lines(path: str) -> list[str]:
        return Path(path).read_text(encoding="utf-8", errors="replace").splitlines() if Path(path).exists() else []

    cpu = next((line.split(":", 1)[1].strip() for line in lines("/proc/cpuinfo") if line.startswith("model name")),
               platform.processor() or platform.machine())
    mem_kb = next((int(line.split()[1]) for line in lines("/proc/meminfo") if line.startswith("MemTotal:")), 0)
    return {"cpus": os.cpu_count(), "cpu_model": cpu, "memory_gib": round(mem_kb / 1024**2, 1),
            "kernel": platform.release(), "arch": platform.machine(), "python": sys.version.split()[0],
            "platform": sys.platform}


def own_versions() -> dict:
    """graphfleet's side of the measurement: the project and the libraries its hot paths run on."""
    import importlib.metadata as md

    from shared.infra.redis.conn import redis_server_binary

    installed = {(d.metadata["Name"] or "").lower(): d.version for d in md.distributions()}
    out = {dist: installed.get(dist) for dist in ("graphfleet", "celery", "kombu", "redis", "igraph", "leidenalg",
                                                  "tiktoken", "openai", "numpy", "pydantic")}
    try:
        server = subprocess.run([redis_server_binary(), "--version"], capture_output=True, text=True, timeout=10)
        out["redis-server"] = next((w.split("=", 1)[1] for w in server.stdout.split() if w.startswith("v=")), None)
    except (OSError, RuntimeError, subprocess.SubprocessError):
        out["redis-server"] = None
    return out
