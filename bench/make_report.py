"""Render bench/results/*.jsonl into docs/benchmarks.md.

    .venv/bin/python -m bench.make_report
"""

from __future__ import annotations

import json
import platform
from pathlib import Path

from bench.retrieval_records import sets_tables
from bench.walk_bench import walk_table

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
NANO_REFERENCE = {0.0: 2.3, 200.0: 4.5}  # seconds, nano-graphrag on this machine (issue reference)


def _load(name: str) -> list[dict]:
    path = RESULTS / name
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []


def newest(rows: list[dict], *keys: str) -> list[dict]:
    """The last row per key (results files are appended to by every run), in first-seen key order."""
    out: dict[tuple, dict] = {}
    for r in rows:
        out[tuple(r.get(k) for k in keys)] = r
    return list(out.values())


def ingest_table(rows: list[dict]) -> list[str]:
    medians = newest([r for r in rows if r["bench"] == "ingest_median"], "latency_ms", "processes")
    runs = [r for r in rows if r["bench"] == "ingest"]
    out = ["| simulator latency | worker processes per group | runs | wall s (median) | nano-graphrag s (reference) "
           "| ratio | LLM calls by stage "
           "| prompt tokens | completion tokens | entities | relations | communities by level | reports |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for m in medians:
        procs = m.get("processes", 1)
        run = [r for r in runs if r["latency_ms"] == m["latency_ms"] and r.get("processes", 1) == procs][-1]
        nano = NANO_REFERENCE.get(m["latency_ms"])
        ratio = f"{m['seconds_median'] / nano:.2f}" if nano else "-"
        out.append(f"| {m['latency_ms']:.0f} ms | {procs} | {m['runs']} | {m['seconds_median']:.2f} | {nano or '-'} "
                   f"| {ratio} "
                   f"| {run['calls_by_stage']} | {m['prompt_tokens']:,} | {m['completion_tokens']:,} "
                   f"| {run['entities']} | {run['relations']} | {run['communities_by_level']} | {run['reports']} |")
    return out


def query_table(rows: list[dict]) -> list[str]:
    out = ["| latency | mode | only context | s (median) | context tokens | LLM calls | calls by phase "
           "| prompt tokens | completion tokens |", "|---|---|---|---|---|---|---|---|---|"]
    for r in newest([r for r in rows if r["bench"] == "query"], "latency_ms", "mode", "only_need_context"):
        out.append(f"| {r['latency_ms']:.0f} ms | {r['mode']} | {r['only_need_context']} | {r['seconds_median']:.3f} "
                   f"| {r['context_tokens']} | {r['llm_calls']} | {r['by_phase']} | {r['prompt_tokens']} "
                   f"| {r['completion_tokens']} |")
    return out


STAGES = (("glean", "glean"), ("extract", "extract"), ("summar", "summarize"), ("community_report", "report"),
          ("keywords", "keywords"), ("global_map", "map"), ("map_summarize", "map"), ("global_reduce", "reduce"),
          ("rate_community", "rate"), ("causal", "causal"), ("", "answer"))
SYSTEMS = ("graphfleet", "nano", "lightrag")
NAMES = {"graphfleet": "graphfleet", "nano": "nano-graphrag", "lightrag": "LightRAG"}


def stage_of(kind: str) -> str:
    kind = kind.removeprefix("nano_").removeprefix("lightrag_")
    return next(label for key, label in STAGES if key in kind)


def by_stage(calls_by_type: dict | None) -> str:
    out: dict[str, int] = {}
    for kind, v in (calls_by_type or {}).items():
        out[stage_of(kind)] = out.get(stage_of(kind), 0) + v["calls"]
    return ", ".join(f"{k} {n}" for k, n in out.items()) or "-"


def _ratio(ours, theirs) -> str:
    return f"{ours / theirs:.2f}" if ours is not None and theirs else "-"


def compare_tables(rows: list[dict]) -> list[str]:
    """Ingestion and query medians per system, with graphfleet/peer ratios."""
    med = [r for r in rows if r["bench"] == "compare_median"]
    if not med:
        return ["(no results yet: run `bash bench/compare.sh`)", ""]
    head = next((r for r in reversed(rows) if r["bench"] == "machine"), {})
    ours = head.get("graphfleet_versions") or {}
    out = [f"Versions: peers (their venv) {head.get('versions')}; graphfleet (the project's venv) "
           f"{', '.join(f'{k} {v}' for k, v in ours.items()) or '-'}; model `{head.get('model')}`, embeddings dim "
           f"{head.get('embedding_dim')}, "
           f"{head.get('concurrency')} LLM calls in flight per system; corpus `{head.get('corpus')}`; "
           f"medians of {head.get('repeat')} runs. Command: `{head.get('command')}`.", "",
           "### Ingestion", "",
           "| latency | system | wall s (median) | runs (s) | graphfleet/peer s | LLM calls | calls by stage "
           "| graphfleet/peer calls | prompt tokens | completion tokens | graphfleet/peer tokens | embedding calls "
           "| entities | relations | communities (by level) |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    ingest = {(r["system"], r["latency_ms"]): r for r in med if r["phase"] == "ingest"}
    for lat in sorted({k[1] for k in ingest}):
        gf = ingest.get(("graphfleet", lat))
        for system in SYSTEMS:
            r = ingest.get((system, lat))
            if not r:
                continue
            peer = system != "graphfleet" and gf
            tokens = (r["prompt_tokens"] or 0) + (r["completion_tokens"] or 0)
            gf_tokens = (gf["prompt_tokens"] + gf["completion_tokens"]) if gf else None
            out.append(
                f"| {lat:.0f} ms | {NAMES[system]} | {r['seconds_median']:.2f} | {r.get('seconds_all')} "
                f"| {_ratio(gf['seconds_median'], r['seconds_median']) if peer else '-'} | {r['llm_calls']} "
                f"| {by_stage(r['calls_by_type'])} | {_ratio(gf['llm_calls'], r['llm_calls']) if peer else '-'} "
                f"| {r['prompt_tokens']:,} | {r['completion_tokens']:,} | {_ratio(gf_tokens, tokens) if peer else '-'} "
                f"| {r['embedding_calls']} | {r['entities']} | {r['relations']} "
                f"| {r['communities']} {r.get('communities_by_level') or ''} |")
    out += ["", "### Queries (submit to result)", "",
            "graphfleet's figures include the Redis queue, a query worker and the end-of-job message back to the "
            "client; the peers are "
            "called in-process. `only context` = `only_need_context` (no answer call). Context tokens: the returned "
            "context counted with o200k (gpt-4o-mini).", "",
            "| latency | mode | only context | graphfleet s | nano-graphrag s | gf/nano | LightRAG s | gf/LightRAG "
            "| context tokens (gf / nano / LR) | LLM calls (gf / nano / LR) | prompt tokens (gf / nano / LR) "
            "| calls by stage (gf / nano / LR) |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    queries = {(r["system"], r["latency_ms"], r["mode"], r["only_need_context"]): r
               for r in med if r["phase"] == "query"}
    for lat, mode, only in sorted({k[1:] for k in queries}, key=lambda k: (k[0], SYSTEM_MODES.index(k[1]), not k[2])):
        cells = {s: queries.get((s, lat, mode, only)) for s in SYSTEMS}

        def col(key, cells=cells):
            return " / ".join("-" if cells[s] is None or cells[s].get(key) is None else f"{cells[s][key]:,}"
                              for s in SYSTEMS)

        def secs(s, cells=cells):
            return f"{cells[s]['seconds_median']:.3f}" if cells[s] else "-"

        gf = cells["graphfleet"]
        ratio = {s: _ratio(gf["seconds_median"], cells[s]["seconds_median"]) if gf and cells[s] else "-"
                 for s in ("nano", "lightrag")}
        stages = " / ".join(by_stage(cells[s]["calls_by_type"]) if cells[s] else "-" for s in SYSTEMS)
        out.append(f"| {lat:.0f} ms | {mode} | {only} | {secs('graphfleet')} | {secs('nano')} | {ratio['nano']} "
                   f"| {secs('lightrag')} | {ratio['lightrag']} | {col('context_tokens')} | {col('llm_calls')} "
                   f"| {col('prompt_tokens')} | {stages} |")
    return out + ["", *global_phase_table(med)]


def global_phase_table(med: list[dict]) -> list[str]:
    """Global mode's map and reduce work per system: calls and tokens by phase (simulator counters)."""
    rows = [r for r in med if r["phase"] == "query" and r["mode"] == "global"]
    if not rows:
        return []
    out = ["### Global mode: map and reduce phases", "",
           "Per question, from the simulator's counters by prompt type (LightRAG's global mode has no map phase: "
           "it is a keyword search over relations plus one answer call).", "",
           "| latency | only context | system | map calls | map prompt tokens | map completion tokens | reduce calls "
           "| reduce tokens (prompt + completion) | other calls |", "|---|---|---|---|---|---|---|---|---|"]
    for r in sorted(rows, key=lambda r: (r["latency_ms"], not r["only_need_context"], SYSTEMS.index(r["system"]))):
        phases: dict[str, list[int]] = {}
        for kind, v in (r.get("calls_by_type") or {}).items():
            stage = stage_of(kind)
            key = stage if stage in ("map", "reduce") else "other"
            acc = phases.setdefault(key, [0, 0, 0])
            acc[0] += v["calls"]
            acc[1] += v["prompt_tokens"]
            acc[2] += v["completion_tokens"]
        m, red, other = (phases.get(k, [0, 0, 0]) for k in ("map", "reduce", "other"))
        out.append(f"| {r['latency_ms']:.0f} ms | {r['only_need_context']} | {NAMES[r['system']]} | {m[0]} | {m[1]:,} "
                   f"| {m[2]:,} | {red[0]} | {red[1] + red[2]:,} | {other[0]} |")
    return out + [""]


SYSTEM_MODES = ("local", "global", "naive", "hybrid", "mix", "causal")


def retrieval_runs(rows: list[dict]) -> dict[bool, list[dict]]:
    """Per LLM setting, each system's lines from the newest finished run that measured it (systems may
    be run by separate invocations: LightRAG's ingestion alone takes ~25 min), then that run's BM25
    baseline and summary. Runs are split at their ``machine`` line; a run stopped before its summary
    is ignored."""
    runs: list[list[dict]] = []
    for r in rows:
        if r["bench"] == "machine":
            runs.append([])
        elif runs:
            runs[-1].append(r)
    by_llm: dict[bool, list[list[dict]]] = {}
    for run in runs:
        summary = next((r for r in run if r["bench"] == "retrieval_summary"), None)
        if summary:
            by_llm.setdefault(summary["llm"], []).append(run)
    merged: dict[bool, list[dict]] = {}
    for llm, llm_runs in by_llm.items():
        newest = llm_runs[-1]
        summary = next(r for r in newest if r["bench"] == "retrieval_summary")
        chosen: dict[str, list[dict]] = {}
        for run in reversed(llm_runs):
            for system in dict.fromkeys(r.get("system", "graphfleet") for r in run
                                        if r["bench"] in ("retrieval_ingest", "retrieval_mode", "retrieval_error")):
                if system not in chosen and system != "bm25":
                    chosen[system] = [r for r in run if r.get("system", "graphfleet") == system
                                      and r["bench"] != "retrieval_summary"]
        order = ["graphfleet", "nano", "lightrag"]
        lines = [r for system in sorted(chosen, key=lambda x: order.index(x) if x in order else 9)
                 for r in chosen[system]]
        lines += [r for r in newest if r.get("system") == "bm25"]
        merged[llm] = [*lines, summary]
    return merged


def retrieval_table(rows: list[dict]) -> list[str]:
    """Ingest lines, then one row per system and mode, per LLM setting (see ``retrieval_runs``)."""
    out = []
    latest = retrieval_runs(rows)
    for llm, run in sorted(latest.items()):
        summary = next(r for r in run if r["bench"] == "retrieval_summary")
        out += [f"**{'LLM simulator (0 ms)' if llm else 'no LLM (LLM-free extraction, hashing embeddings)'}**: "
                f"{summary['questions']} questions, budget {summary['budget']} tokens ({summary['budget_encoding']}).",
                "", "| system | passages | ingest s | graphfleet/peer s | LLM calls "
                "| index tokens (prompt + completion) | graphfleet/peer tokens | entities | relations |",
                "|---|---|---|---|---|---|---|---|---|"]
        ingests = {r.get("system", "graphfleet"): r for r in run if r["bench"] == "retrieval_ingest"}
        gf = ingests.get("graphfleet")
        for system, r in ingests.items():
            tokens = _index_tokens(r)
            peer = gf is not None and system != "graphfleet"
            out.append(f"| {NAMES.get(system)} | {r['passages']} | {r['seconds']} "
                       f"| {_ratio(gf['seconds'], r['seconds']) if peer else '-'} "
                       f"| {r['llm_calls']} | {tokens:,} | {_ratio(_index_tokens(gf), tokens) if peer else '-'} "
                       f"| {r['entities']} | {r['relations']} |")
        out += ["", *side_by_side(run)]
        out += ["", "| system | mode | questions | gold passages in context (mean) | questions with all gold "
                "passages | context tokens (median) | contexts over budget | s per query (median) |",
                "|---|---|---|---|---|---|---|---|"]
        for r in run:
            if r["bench"] == "retrieval_mode":
                secs = "-" if r["seconds_median"] is None else f"{r['seconds_median']:.3f}"
                system = NAMES.get(r.get("system", "graphfleet"), r.get("system"))
                out.append(f"| {system} | {r['mode']} | {r['questions']} | {r['recall_mean']:.2f} "
                           f"| {r['all_gold_share']:.2f} | {r['context_tokens_median']} "
                           f"| {r.get('over_budget', '-')} | {secs} |")
        out.append("")
        notes = {(r.get("system"), r.get("note") or f"run failed (exit {r.get('returncode')}), see the jsonl")
                 for r in run if r.get("note") or r["bench"] == "retrieval_error"}
        out += [f"- {NAMES.get(system, system)}: {note}" for system, note in sorted(notes)] + ([""] if notes else [])
    return out


def _index_tokens(r: dict) -> int:
    return (r.get("prompt_tokens") or 0) + (r.get("completion_tokens") or 0)


def _recall(r: dict | None, questions: int) -> str:
    """Mean recall; the question count when a system was asked fewer questions than the others."""
    if r is None:
        return "-"
    return f"{r['recall_mean']:.2f}" + (f" ({r['questions']} q)" if r["questions"] != questions else "")


def side_by_side(run: list[dict]) -> list[str]:
    """Per mode: recall and context tokens of each system with graphfleet/peer ratios (recall: above 1 =
    graphfleet keeps more gold passages; tokens: below 1 = graphfleet's context is smaller)."""
    modes = {(r.get("system", "graphfleet"), r["mode"]): r for r in run if r["bench"] == "retrieval_mode"}
    peers = [p for p in ("nano", "lightrag") if any(k[0] == p for k in modes)]
    bm25 = modes.get(("bm25", "bm25 (baseline)"))
    head = ["mode", "graphfleet recall"]
    for p in peers:
        head += [f"{NAMES[p]} recall", f"graphfleet/{NAMES[p]} recall"]
    head += ["context tokens, median (" + " / ".join(["graphfleet", *(NAMES[p] for p in peers)]) + ")",
             "over budget (" + " / ".join(["graphfleet", *(NAMES[p] for p in peers)]) + ")"]
    if bm25:
        head.append("BM25 baseline recall")
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    variants = [m for s, m in modes if s == "graphfleet" and m not in SYSTEM_MODES]  # 'mode [name]', run order
    for mode in (*SYSTEM_MODES, *variants):
        cells = {s: modes.get((s, mode)) for s in ("graphfleet", *peers)}
        if not any(cells.values()):
            continue
        gf = cells["graphfleet"]
        questions = max(r["questions"] for r in cells.values() if r)
        row = [mode, _recall(gf, questions)]
        for p in peers:
            ratio = _ratio(gf["recall_mean"], cells[p]["recall_mean"]) if gf and cells[p] else "-"
            row += [_recall(cells[p], questions), ratio]
        row += [" / ".join("-" if r is None else f"{r['context_tokens_median']:,.0f}" for r in cells.values()),
                " / ".join("-" if r is None else str(r.get("over_budget", "-")) for r in cells.values())]
        if bm25:
            row.append(f"{bm25['recall_mean']:.2f}")
        out.append("| " + " | ".join(row) + " |")
    return out


def scaling_table(rows: list[dict]) -> list[str]:
    med = newest([r for r in rows if r["bench"] == "scaling_median"], "corpus", "processes", "latency_ms")
    runs = [r for r in rows if r["bench"] == "scaling"]
    if not med:
        return ["(no results yet: `.venv/bin/python -m bench.scaling_bench --out bench/results/scaling.jsonl`)", ""]
    out = ["| corpus | simulator latency | documents | tokens | chunks | worker processes per queue group "
           "| wall s (median) | chunks/s | speed-up vs 1 process | LLM calls | entities | relations |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    med.sort(key=lambda m: (m["corpus"] != "carol", m["corpus"], m["latency_ms"], m["processes"]))
    for m in med:
        same = [x for x in med if (x["corpus"], x["latency_ms"]) == (m["corpus"], m["latency_ms"])]
        one = next((x for x in same if x["processes"] == 1), None)
        run = [r for r in runs if (r["corpus"], r["processes"], r["latency_ms"])
               == (m["corpus"], m["processes"], m["latency_ms"])][-1]
        speedup = f"{m['chunks_per_s_median'] / one['chunks_per_s_median']:.2f}" if one else "-"
        out.append(f"| {m['corpus']} | {m['latency_ms']:.0f} ms | {m['documents']} | {m['tokens']:,} | {m['chunks']} "
                   f"| {m['processes']} "
                   f"| {m['seconds_median']:.1f} | {m['chunks_per_s_median']:.1f} | {speedup} | {run['llm_calls']:,} "
                   f"| {run['entities']:,} | {run['relations']:,} |")
    return out + [""]


def clustering_table(rows: list[dict]) -> list[str]:
    rows = [r for r in rows if r.get("bench") == "clustering"]
    if not rows:
        return ["(no results yet: `.venv/bin/python bench/clustering_bench.py --repeat 3 --graspologic-python "
                ".bench/peers-venv/bin/python --out bench/results/clustering.jsonl`)", ""]
    out = ["| graph | nodes | edges | graphfleet s (median) | graspologic s (median) | graphfleet/graspologic "
           "| communities per level (graphfleet) | communities per level (graspologic) |",
           "|---|---|---|---|---|---|---|---|"]
    latest = {(r["graph"], r["impl"]): r for r in rows}
    for graph in dict.fromkeys(r["graph"] for r in rows):
        ours, theirs = latest.get((graph, "graphfleet")), latest.get((graph, "graspologic"))
        if not ours:
            continue
        t = theirs or {}
        out.append(f"| {graph} | {ours['nodes']:,} | {ours['edges']:,} | {ours['seconds']:.3f} "
                   f"| {t.get('seconds', '-')} | {_ratio(ours['seconds'], t.get('seconds'))} "
                   f"| {'/'.join(str(v) for v in ours['levels'].values())} "
                   f"| {'/'.join(str(v) for v in (t.get('levels') or {}).values()) or '-'} |")
    return out + [""]


def machine_line() -> str:
    """The newest machine record of any results file (they are written by the benchmarks themselves)."""
    found = [r for name in ("compare.jsonl", "retrieval.jsonl", "scaling.jsonl") for r in _load(name)
             if r["bench"] == "machine" and r.get("cpu_model")]
    if not found:
        return f"Machine: {platform.machine()}, 2 cores, Python {platform.python_version()}."
    m = found[-1]
    return (f"Machine: {m['cpus']} cores ({m['cpu_model']}, {m['arch']}), {m['memory_gib']} GiB, Linux {m['kernel']}, "
            f"Python {m['python']}.")


def _notes(name: str) -> list[str]:
    """A hand-written results file (what the figures mean), when there is one."""
    path = RESULTS / name
    return [*path.read_text().splitlines(), ""] if path.exists() else []


def main() -> None:
    ingest, query = _load("ingest.jsonl"), _load("query.jsonl")
    lines = [
        "# Benchmarks", "",
        f"{machine_line()} Figures on a shared "
        "machine are noisy: each row is a median of repeated runs. LLM = the project's simulator over HTTP "
        "(`graphfleet llm-simulator`), deterministic, the same for every system measured.", "",
        "Everything below: `bash bench/compare.sh` (installs nano-graphrag and LightRAG into `.bench/peers-venv`, "
        "runs every benchmark, rewrites this file with `.venv/bin/python -m bench.make_report`).", "",
        "## graphfleet vs nano-graphrag vs LightRAG (A Christmas Carol)", "",
        "`.venv/bin/python -m bench.compare --repeat 3 --out bench/results/compare.jsonl`", "",
        *compare_tables(_load("compare.jsonl")),
        *_notes("compare_notes.md"),
        "## Retrieval quality under a token budget", "",
        "`.venv/bin/python -m bench.retrieval_eval --llm both --out bench/results/retrieval.jsonl` on every "
        "public multi-hop dev set of `../shared/data` (HotpotQA `hotpotqa_hipporag100`: 100 questions, 994 pooled "
        "passages; MuSiQue `musique_dev`: 292 / 4,543; 2WikiMultihopQA `2wikimultihopqa_dev`: 164 / 1,294; "
        "`hoprag_quickstart`: 30 / 399), each ingested into its own fresh stack: the share of gold supporting "
        "passages whose whole text is in the context built with `only_need_context` under a 4,000-token budget "
        "(cl100k). BM25 packs whole passages, best first, into the largest context allowance "
        "(`budget.total_allowed`: the budget less system prompt, query and buffer) any passage-carrying mode got "
        "for the same question (same allowance), and into the whole budget. Per-question records (gold passages' "
        "candidate ranks, kept or not, tokens per section): `bench/results/retrieval.questions.jsonl`.", "",
        *sets_tables(_load("retrieval.jsonl")),
        *_notes("retrieval_notes.md"),
        *(["### HotpotQA only, with nano-graphrag and LightRAG (earlier runs)", "",
            "`.venv/bin/python -m bench.retrieval_eval --systems graphfleet nano lightrag` before the multi-set "
            "runs: BM25 there got the whole budget.", "", *old] if (old := retrieval_table(_load("retrieval.jsonl")))
          else []),
        "### What the graph walk costs per query", "",
        "`.venv/bin/python -m bench.walk_bench --out bench/results/walk.jsonl`: a synthetic passage-entity graph "
        "like the ingested dev sets (~8 entity mentions per passage, a Zipf tail of common names, ~3 relations "
        "per entity); the walk alone (personalized PageRank by power iteration, seeds -> ranked passages), 50 "
        "queries. It grows with the edges; the index is built once per graph version per query-worker process.", "",
        *walk_table(newest([r for r in _load("walk.jsonl") if r.get("bench") == "walk"], "passages")),
        "## Scaling (graphfleet)", "",
        "`.venv/bin/python -m bench.scaling_bench --out bench/results/scaling.jsonl` (simulator at 0 ms; "
        "`--latency 200` for the 200 ms rows; on 2 cores the simulator, Redis and every worker process share "
        "the same two CPUs).", "",
        *scaling_table(_load("scaling.jsonl")),
        "## graphfleet ingestion detail", "",
        "`.venv/bin/python -m bench.ingest_bench --repeat 5 [--processes 2] --out bench/results/ingest.jsonl`", "",
        *ingest_table(ingest), "",
        "## graphfleet queries detail", "", "`.venv/bin/python -m bench.query_bench --repeat 3 --out "
        "bench/results/query.jsonl`", "",
        "Submit-to-result through the gateway-less path (Redis queue -> query worker -> Redis), the client woken "
        "by the job's end-of-job message (rows measured before that change polled every <= 50 ms).", "",
        *query_table(query), "",
        "## Clustering: hierarchical Leiden vs graspologic", "",
        "`.venv/bin/python bench/clustering_bench.py --repeat 3 --graspologic-python .bench/peers-venv/bin/python "
        "--out bench/results/clustering.jsonl`: seeded Barabasi-Albert graphs, `max_cluster_size=10`, weights 1-5; "
        "only the clustering call is timed on both sides (graspologic is the one nano-graphrag installs).", "",
        *clustering_table(_load("clustering.jsonl")),
    ]
    (ROOT / "docs" / "benchmarks.md").write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
