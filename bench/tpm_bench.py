"""The global LLM rate limit against a provider cap: how much of the cap ingestion uses, and how
many 429s it gets.

    .venv/bin/python -m bench.tpm_bench [--tpm 200000] [--chunks 500] [--corpus PATH] [--no-limiter]

The simulator (a subprocess) enforces ``--tpm`` per model over a sliding 60 s window, as OpenAI
does; the workers share ``GRAPHFLEET_RATELIMIT__TPM`` = the same cap for the chat and the embedding
model. The corpus (default: the MSFT earnings calls in /work/shared/data; a ``.json`` list of
``{"doc_id"|"title", "text"}``, a directory of .txt/.md, or one text file) is cut into
``--chunk-tokens`` chunks, and documents are taken until about ``--chunks`` chunks; without the
corpus the bundled sample is repeated, each copy varied so that chunk ids differ. Reports are
extractive (``report.min_llm_members`` is huge) and gleaning is off, to keep the run to a few
minutes; extraction is the LLM-bound phase that is measured.

``share_of_cap`` comes from the usage records (one per LLM call, stamped at completion, when the
provider counted it): the chat tokens of the calls completed in each 60 s window inside the
extraction phase, over the cap (mean, min and max over windows starting at every completion).
``429s`` counts refused calls (and their times); ``429s_sim`` is the simulator's own count. One JSON
line goes to ``--out`` (default bench/results/tpm.jsonl).
"""

from __future__ import annotations

import argparse
import bisect
import json
import time
from pathlib import Path

from bench.common import SAMPLE, emit, machine, redis_server, sim_stats, simulator, stack
from graphfleet_cli.local_client import LocalClient
from shared.domain.tokens import count_tokens
from shared.infra.ingest_submit import DocumentInput, clean_text, submit_ingestion
from shared.infra.llm.usage import read_usage

DEFAULT_CORPUS = Path("/work/shared/data/msft_earnings_calls/corpus.json")
CHAT_MODEL, EMBED_MODEL = "gpt-4o-mini", "text-embedding-3-small"
WINDOW_S = 60.0


def load_corpus(path: Path | None) -> list[tuple[str, str]]:
    """(title, text) documents from ``path``; [] when it does not exist."""
    if path is None or not path.exists():
        return []
    if path.is_dir():
        return [(p.name, p.read_text(encoding="utf-8-sig")) for p in sorted(path.iterdir())
                if p.suffix in (".txt", ".md")]
    if path.suffix == ".json":
        rows = json.loads(path.read_text(encoding="utf-8"))
        return [(str(r.get("doc_id") or r.get("title") or i), r["text"]) for i, r in enumerate(rows)]
    return [(path.name, path.read_text(encoding="utf-8-sig"))]


def varied_sample(copy: int) -> tuple[str, str]:
    """The bundled sample, changed enough per copy that every chunk gets a new content id."""
    text = SAMPLE.read_text(encoding="utf-8-sig")
    paragraphs = text.split("\n\n")
    tagged = [f"{p} (copy {copy}, part {i})" if p.strip() else p for i, p in enumerate(paragraphs)]
    return f"carol-{copy}.txt", "\n\n".join(tagged)


def pick_documents(path: Path | None, chunks: int, chunk_tokens: int, overlap: int) -> list[tuple[str, str]]:
    docs = load_corpus(path)
    source = iter(docs) if docs else (varied_sample(i) for i in range(10_000))
    step = chunk_tokens - overlap
    picked, expected = [], 0
    for title, text in source:
        picked.append((title, text))
        expected += -(-count_tokens(text, CHAT_MODEL) // step)
        if expected >= chunks:
            break
    return picked


def window_shares(calls: list[tuple[float, int]], start: float, end: float, cap: int) -> list[float]:
    """Tokens of the calls completed in each 60 s window [t, t + 60) that starts at a completion time t
    and lies inside [start, end], over the cap. ``calls``: sorted (completion time, tokens)."""
    times = [t for t, _n in calls]
    prefix = [0]
    for _t, n in calls:
        prefix.append(prefix[-1] + n)
    return [(prefix[bisect.bisect_left(times, t + WINDOW_S)] - prefix[i]) / cap
            for i, t in enumerate(times) if start <= t and t + WINDOW_S <= end]


def run(args) -> dict:
    docs = pick_documents(args.corpus, args.chunks, args.chunk_tokens, args.overlap)
    env = {
        "GRAPHFLEET_CHUNKING__SIZE_TOKENS": args.chunk_tokens, "GRAPHFLEET_CHUNKING__OVERLAP_TOKENS": args.overlap,
        "GRAPHFLEET_EXTRACTION__MAX_GLEANING": 0, "GRAPHFLEET_REPORT__MIN_LLM_MEMBERS": 10**9,
        "GRAPHFLEET_RATELIMIT__ENABLED": str(not args.no_limiter).lower(),
        "GRAPHFLEET_RATELIMIT__TPM": json.dumps({CHAT_MODEL: args.limiter_tpm or args.tpm,
                                                 EMBED_MODEL: args.limiter_tpm or args.tpm}),
    }
    with (simulator(latency_ms=args.latency, rate_limit_tpm=args.tpm) as llm, redis_server() as redis_url,
          stack(redis_url, llm, args.concurrency, **env)):
        client = LocalClient(redis_url)
        started = time.time()
        items = [DocumentInput(text=clean_text(text), title=title) for title, text in docs]
        job = submit_ingestion(client.redis, client.celery, args.tenant, items, client.settings)
        view = client.wait(args.tenant, job["job_id"], timeout=args.timeout)
        finished = time.time()
        stats = client.stats(args.tenant)
        records = read_usage(client.redis, args.tenant)
        sim = sim_stats(llm)
    return summarize(args, view, stats, records, sim, started, finished, len(docs))


def summarize(args, view, stats, records, sim, started: float, finished: float, docs: int) -> dict:
    stage_times = view.get("stage_times") or {}
    created = float(view.get("created_at") or started)
    extract_start = created + stage_times.get("extract", 0.0)
    extract_end = created + stage_times.get("merge", finished - created)
    chat = sorted((r.ts, r.prompt_tokens + r.completion_tokens) for r in records
                  if r.model == CHAT_MODEL and not r.error and not r.cache_hit)
    shares = window_shares(chat, extract_start, extract_end, args.tpm)
    phase = [r for r in records if r.model == CHAT_MODEL and not r.cache_hit
             and extract_start <= r.ts <= extract_end]
    timeline = [0] * (int((extract_end - extract_start) // 10) + 1)
    for t, n in chat:
        if extract_start <= t <= extract_end:
            timeline[int((t - extract_start) // 10)] += n
    refused = sorted((round(r.ts - started, 1), r.model, r.stage) for r in records if r.error == "rate_limited")
    return {
        "bench": "tpm", "limiter": not args.no_limiter, "cap_tpm": args.tpm,
        "limiter_tpm": (args.limiter_tpm or args.tpm) if not args.no_limiter else None,
        "latency_ms": args.latency, "concurrency": args.concurrency, "documents": docs,
        "status": view["status"], "chunks": view["progress"]["chunks_total"],
        "chunks_failed": view["progress"]["chunks_failed"], "seconds": round(finished - started, 1),
        "extract_phase_s": round(extract_end - extract_start, 1),
        "share_of_cap_mean": round(sum(shares) / len(shares), 4) if shares else None,
        "share_of_cap_min": round(min(shares), 4) if shares else None,
        "share_of_cap_max": round(max(shares), 4) if shares else None,
        "windows": len(shares),
        "tokens_per_10s": timeline,
        "call_latency_mean_s": round(sum(r.latency_s for r in phase) / len(phase), 3) if phase else None,
        "calls_in_flight_mean": round(sum(r.latency_s for r in phase) / (extract_end - extract_start), 2)
        if phase else None,
        "429s": len(refused), "429s_sim": sim["errors"]["429"],
        "429s_after_60s": sum(t > WINDOW_S for t, _m, _s in refused), "429_at_s_model_stage": refused[:20],
        "llm_calls": view["usage"]["calls"], "prompt_tokens": view["usage"]["prompt_tokens"],
        "completion_tokens": view["usage"]["completion_tokens"],
        "calls_by_stage": {s: v.get("calls", 0) for s, v in view["usage"]["by_stage"].items()},
        "entities": stats["entities"], "relations": stats["relations"],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tpm", type=int, default=200_000, help="the simulator's (provider's) cap per model")
    ap.add_argument("--limiter-tpm", type=int, default=None, help="our budget (default: the cap)")
    ap.add_argument("--no-limiter", action="store_true", help="baseline: only the 429s slow the workers down")
    ap.add_argument("--chunks", type=int, default=500)
    ap.add_argument("--chunk-tokens", type=int, default=300)
    ap.add_argument("--overlap", type=int, default=30)
    ap.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    ap.add_argument("--latency", type=float, default=50.0)
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--timeout", type=float, default=1200.0)
    ap.add_argument("--tenant", default="tpmbench")
    ap.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "tpm.jsonl")
    args = ap.parse_args()
    record = {**run(args), **machine()}
    emit(record, args.out)
    print(f"\n{record['status']}: {record['chunks']} chunks in {record['seconds']} s "
          f"(extraction {record['extract_phase_s']} s); share of the {args.tpm:,} TPM cap used per 60 s window "
          f"during extraction: mean {record['share_of_cap_mean']}, min {record['share_of_cap_min']} "
          f"max {record['share_of_cap_max']} ({record['windows']} windows); 429s: {record['429s']} "
          f"({record['429s_after_60s']} after the first 60 s)")


if __name__ == "__main__":
    main()
