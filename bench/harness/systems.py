"""Running one system on a corpus against a simulator: graphfleet on a fresh stack, a peer (nano-graphrag,
LightRAG) in its own venv through ``peers/peer_run.py``; the compare and cost-table suites' rounds and medians."""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from pathlib import Path

from bench.harness.peers.peer_run import delta, sim_stats
from bench.harness.results import QUERIES, ROOT, median, timed
from bench.harness.stacks import client_stack
from graphfleet_cli.query_client import run_query
from shared.domain.query.params import QueryParam
from shared.domain.tokens import count_tokens

MODEL = "gpt-4o-mini"
EMBEDDING_DIM = 256  # graphfleet's default; the peers are given the same
MODES = {
    "graphfleet": ["local", "global", "naive", "hybrid", "causal"],
    "nano": ["local", "global", "naive"],
    "lightrag": ["local", "global", "hybrid", "naive"],
}
NANO_BUDGET = 12_000  # nano-graphrag's local max_total_tokens (graphfleet's default is 30,000, seed 004)
_INGEST_FIELDS = ("llm_calls", "prompt_tokens", "completion_tokens", "calls_by_type", "embedding_calls",
                  "embedding_inputs", "chunks", "entities", "relations", "communities", "communities_by_level")
_QUERY_FIELDS = ("context_tokens", "llm_calls", "prompt_tokens", "completion_tokens", "calls_by_type",
                 "embedding_calls")


def peer_versions(python: str) -> dict:
    code = ("import importlib.metadata as m, json; print(json.dumps({p: m.version(p) for p in "
            "('nano-graphrag', 'lightrag-hku', 'graspologic', 'openai', 'tiktoken', 'networkx')}))")
    return json.loads(subprocess.run([python, "-c", code], capture_output=True, text=True, check=True).stdout)


def question(mode: str, run: int, only_context: bool) -> str:
    """A text no earlier query of the run used, so no system's LLM cache (keywords, map, answer) answers."""
    return f"{QUERIES[mode]} (run {run}{', context' if only_context else ''})"


def graphfleet_run(llm: str, corpus: Path, latency: float, run: int, concurrency: int, processes: int) -> list[dict]:
    base = {"system": "graphfleet", "latency_ms": latency, "run": run}
    tenant = f"cmp{run}"
    with client_stack(llm, concurrency, processes) as (_url, _st, client):
        before = sim_stats(llm)
        view, seconds = timed(lambda: client.wait(tenant, client.ingest_files(tenant, [corpus])["job_id"], 3600))
        stats = client.stats(tenant)
        levels = stats["communities_by_level"]
        out = [{"bench": "compare_ingest", **base, "status": view["status"], "seconds": round(seconds, 3),
                **delta(before, sim_stats(llm)), **{k: stats[k] for k in ("chunks", "entities", "relations")},
                "communities": sum(levels.values()), "communities_by_level": levels, "reports": stats["reports"]}]
        # (label, mode, context only, QueryParam overrides): every mode, and local at nano's budget
        cases = [(mode, mode, only, {}) for mode in MODES["graphfleet"] for only in (True, False)]
        cases.append((f"local@{NANO_BUDGET}", "local", False, {"max_total_tokens": NANO_BUDGET}))
        for label, mode, only, extra in cases:
            param = QueryParam(query=question(mode, run, only) + (" (budget)" if extra else ""), mode=mode,
                               only_need_context=only, model=MODEL, **extra)
            before = sim_stats(llm)
            res = run_query(client, tenant, param, 600)
            out.append({"bench": "compare_query", **base, "mode": label, "only_need_context": only,
                        "seconds": res["seconds"], "status": res["status"],
                        "context_tokens": count_tokens(res["context"] or "", MODEL) if only else None,
                        **delta(before, sim_stats(llm))})
    return out


def run_peer_process(python: str, system: str, llm: str, docs: list[str], queries: list[dict],
                     budget: int | None, concurrency: int) -> tuple[list[dict], subprocess.CompletedProcess]:
    """Run ``peers/peer_run.py`` in the peers' venv on a fresh working directory; its JSON lines."""
    python = os.path.abspath(python) if os.sep in python else python  # it runs from the temporary dir
    with tempfile.TemporaryDirectory(prefix=f"gf-{system}-") as tmp:
        results = Path(tmp) / "results.jsonl"
        spec = {"system": system, "base_url": llm, "workdir": str(Path(tmp) / "work"), "model": MODEL,
                "docs": docs, "queries": queries, "embedding_dim": EMBEDDING_DIM, "budget": budget,
                "llm_concurrency": concurrency, "out": str(results)}
        spec_path = Path(tmp) / "spec.json"
        spec_path.write_text(json.dumps(spec), encoding="utf-8")
        env = {**os.environ, "TIKTOKEN_CACHE_DIR": str(ROOT / ".bench" / "tiktoken"), "OPENAI_BASE_URL": llm,
               "OPENAI_API_KEY": "sk-bench", "PYTHONPATH": ""}
        proc = subprocess.run([python, str(Path(__file__).parent / "peers" / "peer_run.py"), str(spec_path)],
                              cwd=tmp, env=env, capture_output=True, text=True, timeout=7200)
        lines = [json.loads(ln) for ln in results.read_text().splitlines()] if results.exists() else []
    return lines, proc


def peer_run(python: str, system: str, llm: str, corpus: Path, latency: float, run: int, concurrency: int,
             budget: int | None = None) -> list[dict]:
    queries = [{"id": f"{mode}-{only}", "mode": mode, "query": question(mode, run, only),
                "only_need_context": only} for mode in MODES[system] for only in (True, False)]
    lines, proc = run_peer_process(python, system, llm, [corpus.read_text(encoding="utf-8")], queries, budget,
                                   concurrency)
    base = {"system": system, "latency_ms": latency, "run": run}
    out = []
    for rec in lines:
        if rec["phase"] == "ingest":
            out.append({"bench": "compare_ingest", **base, "status": "succeeded" if proc.returncode == 0 else "failed",
                        **{k: v for k, v in rec.items() if k not in ("phase", "system")}})
        else:
            text = rec.pop("output") or ""
            out.append({"bench": "compare_query", **base, "status": "failed" if rec["error"] else "succeeded",
                        "context_tokens": count_tokens(text, MODEL) if rec["only_need_context"] else None,
                        **{k: v for k, v in rec.items() if k not in ("phase", "system", "id")}})
    if proc.returncode != 0 or not any(r["bench"] == "compare_ingest" for r in out):
        out.append({"bench": "compare_error", **base, "returncode": proc.returncode, "stderr": proc.stderr[-2000:]})
    return out


def schedule(systems: list[str], repeat: int, warmup: int) -> list[tuple[int, str, bool]]:
    """(run, system, is warm-up) in running order: ``warmup`` rounds, then ``repeat`` measured ones, each round
    every system once, in the reverse order of the round before (so no system always runs first)."""
    out = []
    for run in range(warmup + repeat):
        out += [(run, system, run < warmup) for system in (systems if run % 2 == 0 else systems[::-1])]
    return out


def run_system(system: str, llm: str, corpus: Path, latency: float, run: int, warmup: bool, args, concurrency: int,
               processes: int | str) -> list[dict]:
    """One ingestion and its queries (graphfleet at ``concurrency`` and ``processes``), marked ``warmup`` when the
    run is one (no median counts them); a failure is a ``compare_error`` record, and the run goes on."""
    try:
        if system == "graphfleet":
            recs = graphfleet_run(llm, corpus, latency, run, concurrency, processes)
        else:
            recs = peer_run(args.peers_python, system, llm, corpus, latency, run, args.concurrency)
    except Exception as exc:  # a crashed run must not lose the others of a long measurement
        recs = [{"bench": "compare_error", "system": system, "latency_ms": latency, "run": run,
                 "error": f"{type(exc).__name__}: {exc}"[:2000]}]
    return [{**r, "warmup": True} for r in recs] if warmup else recs


def medians(rows: list[dict]) -> list[dict]:
    """One ``compare_median`` line per (system, latency) for ingestion and per query mode (warm-ups left out)."""
    out = []
    rows = [r for r in rows if not r.get("warmup")]
    ingests = [r for r in rows if r["bench"] == "compare_ingest" and r["status"] == "succeeded"]
    for key in sorted({(r["system"], r["latency_ms"]) for r in ingests}):
        runs = [r for r in ingests if (r["system"], r["latency_ms"]) == key]
        out.append({"bench": "compare_median", "phase": "ingest", "system": key[0], "latency_ms": key[1],
                    "runs": len(runs), "seconds_median": median([r["seconds"] for r in runs], 3),
                    "seconds_all": [r["seconds"] for r in runs], **{k: runs[0].get(k) for k in _INGEST_FIELDS}})
    queries = [r for r in rows if r["bench"] == "compare_query"]
    for key in sorted({(r["system"], r["latency_ms"], r["mode"], r["only_need_context"]) for r in queries}):
        runs = [r for r in queries if (r["system"], r["latency_ms"], r["mode"], r["only_need_context"]) == key]
        out.append({"bench": "compare_median", "phase": "query", "system": key[0], "latency_ms": key[1],
                    "mode": key[2], "only_need_context": key[3], "runs": len(runs),
                    "failed": sum(r["status"] != "succeeded" for r in runs),
                    "seconds_median": median([r["seconds"] for r in runs], 4),
                    **{k: runs[-1].get(k) for k in _QUERY_FIELDS}})
    return out

