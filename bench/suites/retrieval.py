"""Retrieval quality under a token budget: the share of gold supporting passages present in the context.

    .venv/bin/python -m bench.suites.retrieval [--sets hotpotqa musique 2wiki quickstart] [--llm sim|none|both]
        [--modes local global naive hybrid causal graph] [--budget 4000] [--limit N] [--latency-ms 0]
        [--questions Q.json [--corpus C.json] [--join ""]] [--out bench/results/retrieval.jsonl]
        [--questions-out PATH] [--bm25-top-k 300] [--hybrid-bm25-weight 0.5]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import time
from pathlib import Path

from bench.harness import results
from bench.harness.datasets import DATA_ROOT, SETS, Dataset, load_files, load_named_set
from bench.harness.peers.peer_run import delta, sim_stats
from bench.harness.results import emit, machine, timed
from bench.harness.retrieval_baselines import BASELINE_MODES, BM25_TOP_K, BUDGET_MODEL, HYBRID_BM25_WEIGHT, Baselines
from bench.harness.retrieval_records import (
    bm25_allowances,
    chunk_passage_map,
    graphfleet_keys,
    question_record,
    set_summary,
)
from bench.harness.stacks import client_stack, ingest_docs, simulator
from shared.domain.query.params import QueryParam
from shared.domain.tokens import count_tokens
from shared.infra.tenancy.usage import read_usage

DEFAULT_MODES = ["local", "global", "naive", "hybrid", "causal", "graph"]
LLM_FLAGS = {"sim": [True], "none": [False], "both": [True, False]}


def parse_variant(spec: str) -> tuple[str, str, dict]:
    """``NAME:MODE:key=value,key=value`` -> (name, mode, QueryParam overrides); values are JSON when they
    parse, else strings. E.g. ``fixed-caps:hybrid:max_entity_tokens=6000``. Checked before any ingestion."""
    name, mode, assignments = (spec.split(":", 2) + ["", ""])[:3]
    if not name or not mode:
        raise argparse.ArgumentTypeError(f"variant {spec!r}: expected NAME:MODE:key=value[,key=value...]")
    fields: dict = {}
    for key, _sep, raw in (item.partition("=") for item in assignments.split(",") if item.strip()):
        with contextlib.suppress(ValueError):
            raw = json.loads(raw)
        fields[key.strip()] = raw
    try:
        QueryParam(mode=mode, **fields)
    except Exception as exc:  # pydantic's ValidationError, or a missing NAME:MODE
        raise argparse.ArgumentTypeError(f"variant {spec!r}: {exc}") from None
    return name, mode, fields


def _measure_modes(client, args, ds: Dataset, head: dict, chunk_keys: dict[str, str]) -> dict[str, list[dict]]:
    """Each (label, mode, overrides): every question's context under the budget, as question records."""
    runs = [(mode, mode, {}) for mode in args.modes]
    by_mode: dict[str, list[dict]] = {}
    for label, mode, fields in runs + [(f"{mode} [{name}]", mode, fields) for name, mode, fields in args.variant]:
        for q in ds.questions:
            param = QueryParam(mode=mode, query=q["question"], only_need_context=True,
                               **{"max_total_tokens": args.budget, "model": BUDGET_MODEL, **fields})
            out, seconds = timed(client.query, "eval", param)
            result = out.get("result") or {}
            context = result.get("context") or ""
            ranked, kept = graphfleet_keys(result, chunk_keys)
            rec = question_record({**head, "mode": label}, q, context, ds.passages, result=result, ranked=ranked,
                                  kept=kept, context_tokens=count_tokens(context, BUDGET_MODEL), seconds=seconds)
            if out.get("status") != "succeeded":
                rec["error"] = out.get("error") or out.get("status")
            by_mode.setdefault(label, []).append(rec)
    return by_mode


def run_graphfleet(args, ds: Dataset, llm: str | None, head: dict, embed_in_process: dict) -> dict[str, list[dict]]:
    """A fresh stack: ingest the set's passages, map chunk ids to passages, then every mode's questions."""
    head, docs = {**head, "system": "graphfleet"}, ds.docs
    with client_stack(llm, 16, args.processes) as (_url, _st, client):
        before = sim_stats(llm) if llm else None
        started, started_ts = time.perf_counter(), time.time()
        job, view = ingest_docs(client, "eval", [(ds.titles.get(k, k), doc) for k, doc in docs.items()], 3 * 3600)
        ingest_s = time.perf_counter() - started
        stats, usage, store = client.stats("eval"), view["usage"], client.store("eval")
        chunk_keys = chunk_passage_map({i: c.text for i, c in store.chunks(store.all_chunk_ids()).items()}, docs)
        # chat calls and tokens from the simulator's counters, as for the peers
        sim = delta(before, sim_stats(llm)) if llm else {"llm_calls": 0, "prompt_tokens": 0, "completion_tokens": 0,
                                                          "embedding_calls": None}
        emit({"bench": "retrieval_set_ingest", **head, "status": view["status"], "seconds": round(ingest_s, 2),
              "passages": len(docs), "chunks_mapped": len(chunk_keys), "passages_mapped": len(set(chunk_keys.values())),
              **{k: sim[k] for k in ("llm_calls", "prompt_tokens", "completion_tokens", "embedding_calls")},
              "embedding": embed_usage(client.redis, job["job_id"], usage, len(docs), started_ts),
              "embed_in_process": embed_in_process,
              **{k: stats[k] for k in ("chunks", "entities", "relations", "communities_by_level")}}, args.out)
        return _measure_modes(client, args, ds, head, chunk_keys)


def in_flight_s(records) -> float:
    """Seconds some call of ``records`` (usage records) was in flight: the union of their intervals."""
    covered, reach = 0.0, float("-inf")
    for lo, hi in sorted((r.ts - r.latency_s, r.ts) for r in records):
        if hi > reach:
            covered += hi - max(lo, reach)
            reach = hi
    return covered


def embed_usage(redis, job_id: str, usage: dict, passages: int, since: float) -> dict:
    """The ingestion's embedding cost: the job's ``embed`` calls and input tokens, their summed latency and the
    wall time while one ran (they overlap), their models, and passages per second of that wall time."""
    stage = (usage.get("by_stage") or {}).get("embed") or {}
    recs = [r for r in read_usage(redis, "eval", since) if r.job_id == job_id and r.stage == "embed"]
    wall = in_flight_s(recs)
    return {"calls": stage.get("calls", 0), "input_tokens": stage.get("prompt_tokens", 0),
            "latency_s": round(sum(r.latency_s for r in recs), 3), "wall_s": round(wall, 3),
            "models": sorted({r.model for r in recs}),
            "passages_per_s": round(passages / wall, 1) if wall > 0 else None}


def run_set(args, ds: Dataset, llm_url: str | None, run_id: str) -> None:
    """One set under each LLM setting: graphfleet, the baselines; the set summaries. The baselines
    rank each question once for every setting, and each setting packs them into its own allowances."""
    base = Baselines(ds.docs, args.bm25_top_k, args.hybrid_bm25_weight)
    rankings = base.rank_all(ds.questions)
    for llm in LLM_FLAGS[args.llm]:
        head = {"run": run_id, "set": ds.name, "llm": llm}
        by_mode = run_graphfleet(args, ds, llm_url if llm else None, head, base.embed_cost)
        flat = [r for records in by_mode.values() for r in records]
        allowances = bm25_allowances(flat, args.budget)
        baselines = {name: base.records(ds, {**head, "system": name, "mode": name}, rankings[name], allowances,
                                        args.budget) for name in BASELINE_MODES}
        baselines["bm25_full"] = base.records(ds, {**head, "system": "bm25", "mode": "bm25_full"}, rankings["bm25"],
                                              None, args.budget)
        emit([*flat, *(r for name in ("bm25", "bm25_full", "hybrid_baseline", "dense") for r in baselines[name])],
             args.questions_out, echo=False)
        emit(set_summary({**head, "system": "graphfleet"}, by_mode, args.budget, len(ds.passages), **baselines,
                         embed_cost=base.embed_cost, hybrid_bm25_weight=args.hybrid_bm25_weight), args.out)


def run(args) -> None:
    sets = [load_named_set(name, args.data_dir) for name in args.sets]
    if args.questions:
        sets.append(load_files([(args.questions, args.join)], args.corpus, name=args.questions.stem))
    for ds in sets:
        ds.questions = ds.questions[: args.limit] if args.limit else ds.questions
    run_id = time.strftime("%Y-%m-%dT%H:%M:%S")
    emit({"bench": "machine", **machine(), "run": run_id,
          "command": " ".join([".venv/bin/python -m bench.suites.retrieval", *sys.argv[1:]]),
          "sets": {ds.name: {"questions": len(ds.questions), "passages": len(ds.passages), "skipped": ds.skipped}
                   for ds in sets},
          "llm": LLM_FLAGS[args.llm], "modes": args.modes,
          "budget": args.budget, "bm25_top_k": args.bm25_top_k,
          "hybrid_bm25_weight": args.hybrid_bm25_weight}, args.out)
    with contextlib.ExitStack() as es:
        llm_url = es.enter_context(simulator(latency_ms=args.latency_ms)) if True in LLM_FLAGS[args.llm] else None
        for ds in sets:
            run_set(args, ds, llm_url, run_id)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The options, resolved: sets (all four unless --questions), --questions' corpus, the questions file."""
    ap = results.parser(__doc__, processes=1)
    ap.add_argument("--sets", nargs="*", choices=list(SETS), default=None,
                    help="named sets (default: all four, or none when --questions is given)")
    ap.add_argument("--data-dir", type=Path, default=DATA_ROOT)
    ap.add_argument("--questions", type=Path, default=None, help="any set: a JSON array or JSON lines file")
    ap.add_argument("--corpus", type=Path, default=None,
                    help="its pooled passages (default: <questions stem>_corpus.json, else the questions' contexts)")
    ap.add_argument("--join", default="", help="--questions' sentence joiner (HotpotQA: \"\", 2WikiMultihopQA: \" \")")
    ap.add_argument("--budget", type=int, default=4000)
    ap.add_argument("--modes", nargs="+", default=DEFAULT_MODES, choices=DEFAULT_MODES)
    ap.add_argument("--llm", choices=list(LLM_FLAGS), default="sim",
                    help="sim: the simulator; none: LLM-free extraction, no LLM at query time; both: each in turn")
    ap.add_argument("--bm25-top-k", type=int, default=BM25_TOP_K,
                    help="the baselines' top k: BM25's, the dense list's and the fused hybrid's")
    ap.add_argument("--hybrid-bm25-weight", type=float, default=HYBRID_BM25_WEIGHT,
                    help="the hybrid baseline's BM25 share W in z-score fusion (dense: 1 - W)")
    ap.add_argument("--latency-ms", type=float, default=0.0)
    ap.add_argument("--limit", type=int, default=0, help="first N questions of each set only")
    ap.add_argument("--variant", action="append", type=parse_variant, default=[], metavar="NAME:MODE:k=v,...",
                    help="graphfleet: also MODE with these QueryParam overrides (repeatable), as 'MODE [NAME]'")
    ap.add_argument("--questions-out", type=Path, default=None,
                    help="per-question records (default: <out stem>.questions.jsonl beside --out)")
    args = ap.parse_args(argv)
    if args.sets is None:
        args.sets = [] if args.questions else list(SETS)
    if args.questions and args.corpus is None:
        guess = args.questions.with_name(args.questions.stem + "_corpus.json")
        args.corpus = guess if guess.exists() else None
    if not args.sets and not args.questions:
        ap.error("nothing to measure: --sets or --questions")
    if args.questions_out is None and args.out is not None:
        args.questions_out = args.out.with_name(args.out.stem + ".questions.jsonl")
    return args


if __name__ == "__main__":
    run(parse_args())
