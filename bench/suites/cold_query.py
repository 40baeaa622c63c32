"""A cold query worker's first local query on a synthetic tenant of N passages, end to end (issue 60: at most 1 s
at 100,000 passages), against the same worker's warm queries.

    .venv/bin/python -m bench.suites.cold_query [--passages 100000] [--queries 10] [--trials 1]
        [--build-workers 2] [--no-communities] [--chunk-top-k N] [--pretouch-mb N [N ...]]
        --out bench/results/cold_query.jsonl

The tenant (``bench.harness.synthetic_tenant``) is written into an embedded Redis by graphfleet's own stores and
pipeline stages, shaped like an ingestion's output (``bench.harness.synthetic_graph``: ~8 entity mentions and ~6
entities per passage, ~3 relations per entity; ~1 KB of text per passage; communities and extractive reports).
Its 256-dimension vectors are random unit vectors recorded as the local embedder's: embedding 100,000 passages for
real is not needed to time loading them (the vector half of a search then ranks at random, BM25 finds the passages
a question names). Then the ingestion's warm-up (``warmup.warm_tenant``, in a separate process) writes the index
snapshots a cold worker loads (``gf:t:{<tenant>}:idxsnap:<kind>``). Each phase then starts a fresh worker stack on
that Redis (the query group only, no LLM: the local embedder embeds the question) and times, from submit to
result, its first context-only local query (``LocalClient.query``, the client's sender warmed first, as the
gateway warms its own), then ``--queries`` more on the same worker (warm):

* ``snapshots``: the tenant was never announced, so the worker does not warm it before consuming
  (``warmup.prepare_query_worker`` warms only the recently announced tenants) and its first query loads every
  index itself (``index_loads.prefetch_cold``): from the snapshots, the vector matrices from their blocks;
* ``rows``: the snapshots deleted first: the first query builds every index from the tenant's rows (and, as in
  production, writes the snapshots again before its indexes are used);
* ``announced``: the tenant announced first, as an ingestion's end does (``announce_index_update``): the worker
  warms it before it consumes (``START_WARM_S`` is checked between tenants: a single tenant is warmed whole), so
  ``stack_start_s`` grows and the first query is warm. This is what production does for a tenant indexed
  recently; the two phases before are a worker that evicted the tenant, or started after too many others were
  announced.

Reported per phase: the tenant (passages, entities, relations, communities, build seconds per step, the warm-up's
seconds, the snapshots' bytes, Redis memory), the stack's start seconds, the first query's seconds, its
``context_ms`` (the worker's context build, index loads included) and its context (kept / candidate rows per
section: with the default 30,000-token budget passages fill it first, ``--chunk-top-k`` leaves room for graph
rows), the warm p50 / p95 and each warm query's seconds, and the query worker's RSS (started, after the first
query, after the warm ones).
"""

from __future__ import annotations

import itertools
import multiprocessing
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import psutil

from bench.harness.results import emit, machine, median, parser, percentile, timed
from bench.harness.stacks import redis_server
from bench.harness.synthetic_tenant import (
    BuiltTenant,
    build_tenant,
    drop_snapshots,
    snapshot_sizes,
    warm_snapshots,
)
from graphfleet_cli.local_client import LocalClient
from graphfleet_cli.stack import Stack
from shared.domain.query.params import QueryParam
from shared.infra.messaging.queueing import WORKER_GROUPS
from shared.infra.redis.conn import connect
from shared.infra.store.warm_announce import RECENT_KEPT, announce_index_update, recent_announcements
from shared.infra.store.warmup import warm_sender

TENANT = "cold"
PHASES = ("snapshots", "rows", "announced")
QUERY_GROUP = [g for g in WORKER_GROUPS if g[0] == "query"]  # the query and reducer queues: nothing else runs
STACK_ENV = {"GRAPHFLEET_LLM_BASE_URL": "", "GRAPHFLEET_LLM_API_KEY": "sk-bench"}  # no LLM: the local embedder
QUERY_TIMEOUT_S = 1800.0  # a first query building a 100,000-passage tenant from its rows took 81 s
READY_TIMEOUT_S = 600.0  # a worker that warms an announced large tenant before consuming is ready late


class QueryStack(Stack):
    """A stack that waits longer for its workers (``announced``: the warm-up runs before the worker consumes)."""

    def wait_ready(self, timeout: float = READY_TIMEOUT_S) -> None:
        super().wait_ready(timeout)


def say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def mib(n: int) -> float:
    return round(n / 2**20, 1)


def prepare(url: str, args, passages: int) -> tuple[BuiltTenant, dict]:
    """Write the tenant, then its snapshots (a warm-up in another process); the tenant's figures."""
    built, build_s = timed(build_tenant, url, TENANT, passages, communities=not args.no_communities,
                           workers=args.build_workers, say=lambda m: say(f"{passages} passages, {m}"))
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        warm_s = pool.submit(warm_snapshots, url, TENANT).result()  # in the child: index builds and snapshots
    sizes = snapshot_sizes(connect(url), TENANT)
    say(f"{passages} passages: built in {build_s:.1f} s, snapshots written in {warm_s:.1f} s: {sizes}")
    return built, {
        **built.sizes, "build_s": round(build_s, 1), "build_steps_s": built.seconds, "warm_up_s": round(warm_s, 2),
        "snapshot_bytes": sum(sizes.values()), "snapshot_bytes_by_kind": sizes,
        "snapshot_bytes_per_passage": round(sum(sizes.values()) / passages),
        "redis_used_mib": mib(connect(url).info("memory")["used_memory"])}


def query(client: LocalClient, text: str, args) -> tuple[dict, float]:
    """One context-only local query, submit to result: (its result, seconds). A failed query is an error."""
    extra = {"chunk_top_k": args.chunk_top_k} if args.chunk_top_k else {}
    answer, seconds = timed(client.query, TENANT, QueryParam(query=text, mode="local", only_need_context=True,
                                                             **extra), timeout=QUERY_TIMEOUT_S)
    if answer["status"] != "succeeded":
        raise RuntimeError(f"query {answer['query_id']} {answer['status']}: {answer['error']}")
    return answer["result"], seconds


def context_rows(result: dict) -> dict[str, list[int]]:
    """Section -> [rows kept, candidate rows] of a query's context. An empty context is an error: the tenant
    would be incomplete and the timing meaningless."""
    rows = {s["name"]: [s["kept"], s["candidates"]] for s in result["budget"]["sections"]}
    if not rows.get("sources", [0])[0] or not rows.get("entities", [0, 0])[1]:
        raise RuntimeError(f"the first query found no passage or no entity: {rows}")
    return rows


def worker_rss(stack: Stack) -> int:
    return psutil.Process(dict(stack.procs)["query"].pid).memory_info().rss


def run_phase(url: str, phase: str, questions, args, pretouch_mb: int = 0) -> dict:
    """A fresh query worker (its start timed), its first query, then ``--queries`` warm ones."""
    redis = connect(url)
    if phase == "rows":
        drop_snapshots(redis, TENANT)
    if phase == "announced":
        announce_index_update(redis, TENANT)  # a worker that starts warms the recently announced tenants
    announced = TENANT in recent_announcements(redis, RECENT_KEPT)
    client = LocalClient(url)
    warm_sender(client.celery)  # the client's first send would otherwise pay its broker connection
    with tempfile.TemporaryDirectory() as tmp:
        started = time.perf_counter()
        env = {**STACK_ENV, "GRAPHFLEET_QUERY__PRETOUCH_MB": str(pretouch_mb)}
        with QueryStack(data_dir=Path(tmp), redis_url=url, extra_env=env, groups=QUERY_GROUP) as stack:
            start_s, rss = time.perf_counter() - started, [worker_rss(stack)]
            first, first_s = query(client, next(questions), args)
            rss.append(worker_rss(stack))
            warm = [query(client, next(questions), args)[1] for _ in range(args.queries)]
            rss.append(worker_rss(stack))
    client.close()
    return {"phase": phase, "announced": announced, "stack_start_s": round(start_s, 2),
            "first_s": round(first_s, 3), "first_context_ms": first["details"].get("context_ms"),
            "first_context_rows": context_rows(first), "warm_runs": len(warm), "warm_p50_s": median(warm, 3),
            "warm_p95_s": round(percentile(warm, 0.95), 3) if warm else None,
            "warm_query_s": [round(w, 3) for w in warm],
            "worker_rss_mib": dict(zip(("started", "after_first", "after_warm"), map(mib, rss), strict=True)),
            "snapshot_bytes_after": sum(snapshot_sizes(redis, TENANT).values())}


def main() -> None:
    ap = parser(__doc__)
    ap.add_argument("--passages", type=int, nargs="+", default=[100_000])
    ap.add_argument("--queries", type=int, default=10, help="warm queries after the first, per phase")
    ap.add_argument("--trials", type=int, default=1, help="fresh workers per phase")
    ap.add_argument("--phases", nargs="+", choices=PHASES, default=list(PHASES))
    ap.add_argument("--build-workers", type=int, default=2, help="processes writing the tenant")
    ap.add_argument("--no-communities", action="store_true", help="no clustering and reports (degrees only)")
    ap.add_argument("--chunk-top-k", type=int, default=None, help="the queries' chunk_top_k (default: the server's)")
    ap.add_argument("--pretouch-mb", type=int, nargs="+", default=[0],
                    help="the query worker's GRAPHFLEET_QUERY__PRETOUCH_MB (memory touched before it consumes); "
                         "several: each trial runs one worker per value, in turn")
    args = ap.parse_args()
    emit({"bench": "machine", **machine()}, args.out)
    for n in args.passages:
        with redis_server() as url:
            built, tenant = prepare(url, args, n)
            questions = built.questions()
            for phase in [p for p in PHASES if p in args.phases]:  # "announced" last: it leaves the announcement
                for trial, mb in itertools.product(range(args.trials), args.pretouch_mb):
                    record = run_phase(url, phase, questions, args, mb)
                    emit({"bench": "cold_query", **tenant, **record, "trial": trial, "queries": args.queries,
                          "chunk_top_k": args.chunk_top_k, "pretouch_mb": mb}, args.out)


if __name__ == "__main__":
    main()
