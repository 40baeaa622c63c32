"""graphfleet ingestion throughput (chunks/s) with 1, 2 and 4 worker processes per queue group, on the
Christmas Carol and on a corpus 20x its size.

    .venv/bin/python -m bench.suites.scaling [--processes 1 2 4] [--corpora carol x20] [--latency 0]
        [--repeat 1] [--out bench/results/scaling.jsonl]
"""

from __future__ import annotations

import json

from bench.harness.capacity_corpus import MODEL, renamed
from bench.harness.peers.peer_run import delta, sim_stats
from bench.harness.results import DATA, emit, machine, median, parser, timed
from bench.harness.stacks import client_stack, ingest_docs, simulator
from shared.domain.tokens import count_tokens_batch

CAROL = DATA / "christmas_carol.txt"


def x20_docs(factor: int = 20) -> list[tuple[str, str]]:
    """(title, text) documents totalling at least ``factor`` times the Carol's tokens: the earnings calls, the
    HotpotQA passages, the Carol, then renamed copies of it."""
    carol = CAROL.read_text(encoding="utf-8-sig")
    docs = [(f"msft {d['doc_id']}", d["text"]) for d in
            json.loads((DATA / "msft_earnings_calls" / "corpus.json").read_text(encoding="utf-8"))]
    passages = json.loads((DATA / "hotpotqa_hipporag100" / "hotpotqa_train_corpus.json").read_text(encoding="utf-8"))
    docs += [(title, f"{title}\n{''.join(s) if isinstance(s, list) else s}") for title, s in passages.items()]
    docs.append(("A Christmas Carol", carol))
    target = factor * count_tokens_batch([carol], MODEL)[0]
    total = sum(count_tokens_batch([t for _, t in docs], MODEL))
    copy = 0
    while total < target:
        copy += 1
        docs.append((f"A Christmas Carol (renamed copy {copy})", renamed(carol, copy)))
        total += count_tokens_batch([docs[-1][1]], MODEL)[0]
    return docs


CORPORA = {"carol": lambda: [("A Christmas Carol", CAROL.read_text(encoding="utf-8-sig"))], "x20": x20_docs}


def run_once(corpus: str, docs: list[tuple[str, str]], processes: int, latency: float, run: int,
             concurrency: int) -> dict:
    tokens = sum(count_tokens_batch([t for _, t in docs], MODEL))
    with simulator(latency_ms=latency) as llm, client_stack(llm, concurrency, processes) as (_url, _st, client):
        before = sim_stats(llm)
        (_job, view), seconds = timed(ingest_docs, client, "scale", docs, 7200)
        stats = client.stats("scale")
        usage = delta(before, sim_stats(llm))
    return {"bench": "scaling", "corpus": corpus, "processes": processes, "latency_ms": latency, "run": run,
            "status": view["status"], "documents": len(docs), "tokens": tokens, "seconds": round(seconds, 2),
            "chunks": stats["chunks"], "chunks_per_s": round(stats["chunks"] / seconds, 2),
            **{k: stats[k] for k in ("entities", "relations", "communities_by_level", "reports")},
            **{k: usage[k] for k in ("llm_calls", "prompt_tokens", "embedding_calls")},
            "failed_chunks": len(view.get("failed_chunks") or [])}


def main() -> None:
    ap = parser(__doc__, processes=[1, 2, 4], latency=0.0, repeat=1, concurrency=16)
    ap.add_argument("--corpora", nargs="+", default=list(CORPORA), choices=list(CORPORA))
    args = ap.parse_args()
    emit({"bench": "machine", **machine(), "command": "python -m bench.suites.scaling"}, args.out)
    for corpus in args.corpora:
        docs = CORPORA[corpus]()
        for processes in args.processes:
            runs = [run_once(corpus, docs, processes, args.latency, i, args.concurrency) for i in range(args.repeat)]
            emit(runs, args.out)
            emit({"bench": "scaling_median", "corpus": corpus, "processes": processes, "latency_ms": args.latency,
                  "runs": len(runs), **{k: runs[0][k] for k in ("documents", "tokens", "chunks")},
                  "seconds_median": median(r["seconds"] for r in runs),
                  "chunks_per_s_median": median(r["chunks_per_s"] for r in runs)}, args.out)


if __name__ == "__main__":
    main()
