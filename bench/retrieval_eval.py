"""Retrieval quality under a token budget: the share of gold supporting passages present in the context.

    .venv/bin/python -m bench.retrieval_eval [--questions Q.json] [--corpus C.json] [--budget 4000]
        [--modes local global naive hybrid causal] [--latency-ms 0] [--no-llm] [--limit N]
        [--out bench/results/retrieval.jsonl]

No real LLM answers here, so the context itself is measured: for each question of a multi-hop QA set
(HotpotQA / MuSiQue style: ``question``, ``supporting_facts`` = [[title, sentence index]], ``context`` =
[[title, [sentences]]]), graphfleet builds its context with ``only_need_context`` under ``--budget``
tokens counted with cl100k (the query model is set to ``gpt-4``, a cl100k model), and a passage counts
as retrieved when its whole text appears in the context (as a sequence of lower-cased word tokens, so CSV
quoting and reflowed whitespace do not hide it). The baseline ranks the
passages with BM25 and packs them, best first, into the same budget.

The corpus is the pooled passages (``{title: [sentences]}``); without ``--corpus`` it is pooled from the
questions' own contexts. Each passage is ingested as one document ``"<title>\\n<text>"`` through the real
stack (Redis, Celery workers, the LLM simulator over HTTP, or ``--no-llm`` for the LLM-free extractor).
Peers (nano-graphrag, LightRAG) are not run by this script yet (issue 7).
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import time
from pathlib import Path

from bench.common import emit, machine, redis_server, simulator, stack
from shared.retrieval.bm25 import BM25Index
from shared.tokens import count_tokens_batch

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT.parent / "shared" / "data" / "hotpotqa_hipporag100"
BUDGET_MODEL = "gpt-4"  # cl100k_base


def norm(text: str) -> str:
    """Lower-cased word tokens: contexts quote passages as CSV cells (``"`` doubled, commas quoted) or
    reflow whitespace, which must not hide a passage that is there."""
    return " ".join(re.findall(r"\w+", text.lower()))


def load_set(questions_path: Path, corpus_path: Path | None) -> tuple[list[dict], dict[str, str]]:
    """(questions, passages title -> text). Passages are the sentences joined with ""."""
    questions = json.loads(questions_path.read_text(encoding="utf-8"))
    if corpus_path is not None:
        raw = json.loads(corpus_path.read_text(encoding="utf-8"))
        items = raw.items() if isinstance(raw, dict) else ((p["title"], p.get("sentences") or p["text"]) for p in raw)
    else:
        items = ((title, sents) for q in questions for title, sents in q["context"])
    passages = {}
    for title, sents in items:
        passages.setdefault(title, sents if isinstance(sents, str) else "".join(sents))
    return questions, passages


def gold_titles(question: dict) -> list[str]:
    return sorted({title for title, _idx in question["supporting_facts"]})


def recall(context: str, titles: list[str], passages: dict[str, str]) -> float:
    """Share of the gold passages whose whole (normalised) text is in ``context``."""
    if not titles:
        return 0.0
    ctx = norm(context)
    return sum(norm(passages[t]) in ctx for t in titles if t in passages) / len(titles)


def bm25_context(index: BM25Index, passages: dict[str, str], query: str, budget: int) -> tuple[str, int]:
    """Passages by BM25 score, best first, whole passages only, while they fit ``budget`` tokens."""
    ranked = [t for t, _score in index.query(query, top_k=50)]
    texts = [f"{t}\n{passages[t]}" for t in ranked]
    kept, used = [], 0
    for text, tokens in zip(texts, count_tokens_batch(texts, BUDGET_MODEL), strict=True):
        if used + tokens + 1 > budget:
            continue
        kept.append(text)
        used += tokens + 1
    return "\n".join(kept), used


def run(args) -> None:
    questions, passages = load_set(args.questions, args.corpus)
    questions = questions[: args.limit] if args.limit else questions
    emit({"bench": "machine", **machine()}, args.out)
    index = BM25Index.build((t, f"{t}\n{p}") for t, p in passages.items())
    scores = {"bm25": []}
    tokens = {"bm25": []}
    for q in questions:
        ctx, used = bm25_context(index, passages, q["question"], args.budget)
        scores["bm25"].append(recall(ctx, gold_titles(q), passages))
        tokens["bm25"].append(used)

    from graphfleet_cli.local_client import LocalClient
    from shared.ingest_submit import DocumentInput
    from shared.query.params import QueryParam

    llm_cm = simulator(latency_ms=args.latency_ms) if not args.no_llm else None
    llm = llm_cm.__enter__() if llm_cm else None
    try:
        with redis_server() as url, stack(url, llm, 16, args.processes):
            client = LocalClient(url)
            started = time.perf_counter()
            docs = [DocumentInput(text=f"{t}\n{p}", title=t) for t, p in passages.items()]
            job = _submit(client, "eval", docs)
            view = client.wait("eval", job["job_id"], timeout=3600)
            ingest_s = time.perf_counter() - started
            stats = client.stats("eval")
            emit({"bench": "retrieval_ingest", "status": view["status"], "seconds": round(ingest_s, 2),
                  "passages": len(passages), "llm": not args.no_llm, "llm_calls": view["usage"]["calls"],
                  **{k: stats[k] for k in ("chunks", "entities", "relations", "communities_by_level")}}, args.out)
            for mode in args.modes:
                scores[mode], tokens[mode], seconds = [], [], []
                for q in questions:
                    param = QueryParam(mode=mode, query=q["question"], only_need_context=True,
                                       max_total_tokens=args.budget, model=BUDGET_MODEL)
                    t0 = time.perf_counter()
                    out = client.query("eval", param)
                    seconds.append(time.perf_counter() - t0)
                    result = out.get("result") or {}
                    scores[mode].append(recall(result.get("context") or "", gold_titles(q), passages))
                    tokens[mode].append((result.get("budget") or {}).get("total_tokens", 0))
                emit({"bench": "retrieval_mode", "mode": mode, "questions": len(questions),
                      "recall_mean": round(statistics.mean(scores[mode]), 4),
                      "all_gold_share": round(sum(s == 1.0 for s in scores[mode]) / len(questions), 4),
                      "context_tokens_median": statistics.median(tokens[mode]),
                      "seconds_median": round(statistics.median(seconds), 4)}, args.out)
    finally:
        if llm_cm:
            llm_cm.__exit__(None, None, None)
    emit({"bench": "retrieval_mode", "mode": "bm25 (baseline)", "questions": len(questions),
          "recall_mean": round(statistics.mean(scores["bm25"]), 4),
          "all_gold_share": round(sum(s == 1.0 for s in scores["bm25"]) / len(questions), 4),
          "context_tokens_median": statistics.median(tokens["bm25"]), "seconds_median": None}, args.out)
    emit({"bench": "retrieval_summary", "budget": args.budget, "budget_encoding": "cl100k_base",
          "questions": len(questions), "llm": not args.no_llm,
          "recall_mean": {m: round(statistics.mean(v), 4) for m, v in scores.items()}}, args.out)


def _submit(client, tenant: str, docs: list) -> dict:
    from shared.ingest_submit import submit_ingestion

    return submit_ingestion(client.redis, client.celery, tenant, docs, client.settings)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--questions", type=Path, default=DATA / "hotpotqa_train.json")
    ap.add_argument("--corpus", type=Path, default=None,
                    help="pooled passages {title: [sentences]}; default: the set's corpus file if present, "
                         "else pooled from the questions' contexts")
    ap.add_argument("--budget", type=int, default=4000)
    ap.add_argument("--modes", nargs="+", default=["local", "global", "naive", "hybrid", "causal"])
    ap.add_argument("--latency-ms", type=float, default=0.0)
    ap.add_argument("--processes", type=int, default=1)
    ap.add_argument("--no-llm", action="store_true", help="LLM-free extraction and no LLM at query time")
    ap.add_argument("--limit", type=int, default=0, help="first N questions only")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    if args.corpus is None:
        guess = args.questions.with_name(args.questions.stem + "_corpus.json")
        args.corpus = guess if guess.exists() else None
    run(args)


if __name__ == "__main__":
    main()
