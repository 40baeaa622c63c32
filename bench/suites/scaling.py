"""graphfleet ingestion throughput (chunks/s) with 1, 2 and 4 worker processes per queue group, on the
Christmas Carol and on a corpus 20x its size.

    .venv/bin/python -m bench.suites.scaling [--processes 1 2 4] [--corpora carol x20] [--latency 0]
        [--repeat 1] [--out bench/results/scaling.jsonl]
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import time
from pathlib import Path

from bench.harness.peers.peer_run import delta
from bench.harness.results import ROOT, emit, machine
from bench.harness.stacks import redis_server, sim_stats, simulator, stack
from shared.domain.tokens import count_tokens_batch

DATA = ROOT.parent / "shared" / "data"
CAROL = DATA / "christmas_carol.txt"
_NAME = re.compile(r"\b([A-Z][a-z]{2,})\b")
MODEL = "gpt-4o-mini"


def carol_docs() -> list[tuple[str, str]]:
    return [("A Christmas Carol", CAROL.read_text(encoding="utf-8-sig"))]


def renamed(text: str, copy: int) -> str:
    return _NAME.sub(lambda m: f"{m.group(1)}-c{copy}", text)


def x20_docs(factor: int = 20) -> list[tuple[str, str]]:
    """(title, text) documents totalling at least ``factor`` times the Carol's tokens."""
    carol = CAROL.read_text(encoding="utf-8-sig")
    docs = [(f"msft {d['doc_id']}", d["text"]) for d in
            json.loads((DATA / "msft_earnings_calls" / "corpus.json").read_text(encoding="utf-8"))]
    passages = json.loads((DATA / "hotpotqa_hipporag100" / "hotpotqa_train_corpus.json").read_text(encoding="utf-8"))
    docs += [(title, f"{title}\n{''.join(s) if isinstance(s, list) else s}") for title, s in passages.items()]
    docs.append(("A Christmas Carol", carol))
    target = factor * count_tokens_batch([carol], MODEL)[0]
    total = sum(count_tokens_batch([t for _, t in docs], MODEL))
    copy = 1
    while total < target:
        text = renamed(carol, copy)
        docs.append((f"A Christmas Carol (renamed copy {copy})", text))
        total += count_tokens_batch([text], MODEL)[0]
        copy += 1
    return docs


CORPORA = {"carol": carol_docs, "x20": x20_docs}


def run_once(corpus: str, docs: list[tuple[str, str]], processes: int, latency: float, run: int,
             concurrency: int) -> dict:
    from graphfleet_cli.local_client import LocalClient
    from shared.infra.jobs.ingest_submit import DocumentInput, submit_ingestion

    tokens = sum(count_tokens_batch([t for _, t in docs], MODEL))
    with simulator(latency_ms=latency) as llm, redis_server() as url, stack(url, llm, concurrency, processes):
        client = LocalClient(url)
        before, started = sim_stats(llm), time.perf_counter()
        job = submit_ingestion(client.redis, client.celery, "scale",
                               [DocumentInput(text=t, title=title) for title, t in docs], client.settings)
        view = client.wait("scale", job["job_id"], timeout=7200)
        seconds = time.perf_counter() - started
        stats = client.stats("scale")
        usage = delta(before, sim_stats(llm))
    return {"bench": "scaling", "corpus": corpus, "processes": processes, "latency_ms": latency, "run": run,
            "status": view["status"], "documents": len(docs), "tokens": tokens, "seconds": round(seconds, 2),
            "chunks": stats["chunks"], "chunks_per_s": round(stats["chunks"] / seconds, 2),
            "entities": stats["entities"], "relations": stats["relations"],
            "communities_by_level": stats["communities_by_level"], "reports": stats["reports"],
            "llm_calls": usage["llm_calls"], "prompt_tokens": usage["prompt_tokens"],
            "embedding_calls": usage["embedding_calls"], "failed_chunks": len(view.get("failed_chunks") or [])}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--processes", type=int, nargs="+", default=[1, 2, 4])
    ap.add_argument("--corpora", nargs="+", default=list(CORPORA), choices=list(CORPORA))
    ap.add_argument("--latency", type=float, default=0.0)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    emit({"bench": "machine", **machine(), "command": "python -m bench.suites.scaling"}, args.out)
    for corpus in args.corpora:
        docs = CORPORA[corpus]()
        for processes in args.processes:
            runs = [run_once(corpus, docs, processes, args.latency, i, args.concurrency) for i in range(args.repeat)]
            for r in runs:
                emit(r, args.out)
            emit({"bench": "scaling_median", "corpus": corpus, "processes": processes, "latency_ms": args.latency,
                  "runs": len(runs), "documents": runs[0]["documents"], "tokens": runs[0]["tokens"],
                  "chunks": runs[0]["chunks"], "seconds_median": statistics.median(r["seconds"] for r in runs),
                  "chunks_per_s_median": statistics.median(r["chunks_per_s"] for r in runs)}, args.out)


if __name__ == "__main__":
    main()
