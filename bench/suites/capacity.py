"""Capacity figures per unit: Redis memory per chunk / entity / relation / vector, state-Redis operations per
ingested chunk (by stage) and per query (by mode and stage), broker messages per chunk, worker CPU per chunk.

    .venv/bin/python -m bench.suites.capacity [--sizes 1000 10000 50000] [--llm-up-to 1000] [--both-at 1000] [--no-llm]
        [--size-tokens 300] [--overlap 30] [--batch-chunks 0] [--processes 1] [--concurrency 16]
        [--query-repeat 3] [--probe-queries 0] [--out bench/results/capacity.jsonl]
    .venv/bin/python -m bench.report.capacity bench/results/capacity.jsonl
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time

import redis

from bench.harness import capacity_probe as probe
from bench.harness.capacity_corpus import batches, corpus
from bench.harness.cpu import cpu_seconds
from bench.harness.peers.peer_run import sim_stats
from bench.harness.results import emit, machine, own_versions, parser, percentile
from bench.harness.stacks import redis_server, simulator, stack
from graphfleet_cli.local_client import LocalClient
from shared.config import reset_settings_cache
from shared.domain.query.params import QueryParam
from shared.infra.jobs.ingest_submit import DocumentInput, submit_ingestion
from shared.infra.jobs.store import JobStore
from shared.infra.redis.conn import connect, to_str
from shared.infra.redis.keys import recluster_due_key
from shared.pipeline.recluster import KIND as RECLUSTER

QUERIES = {
    "local": "What did Microsoft say about the growth of Azure and the commercial cloud?",
    "global": "What are the main themes across these documents?",
    "naive": "What happens to Scrooge on Christmas morning?",
}
POLL_S = 0.25


class StageRecorder:
    """Snapshots both Redis servers and the stack's CPU whenever a new stage of the job has started."""

    def __init__(self, st, llm: str, state, broker, state_url: str):
        self.st, self.llm, self.state, self.broker, self.state_url = st, llm, state, broker, state_url
        self.marks: list[tuple[str, dict, dict, dict, int]] = []  # (stage, state snap, broker snap, cpu, polls)
        self.seen: set[str] = set()
        self.polls = 0

    def mark(self, stage: str) -> None:
        self.marks.append((stage, probe.snapshot(self.state), probe.snapshot(self.broker),
                           cpu_seconds(self.st, self.llm, self.state_url), self.polls))

    def poll(self, view: dict | None) -> None:
        self.polls += 1
        new = sorted((t, s) for s, t in ((view or {}).get("stage_times") or {}).items() if s not in self.seen)
        if new:
            self.seen.update(s for _t, s in new)
            self.mark("+".join(s for _t, s in new))

    def segments(self, per_view: dict) -> list[dict]:
        return [{"stage": stage, "state": probe.minus(probe.delta(s0, s1), per_view, p1 - p0),
                 "broker": probe.broker_messages(probe.delta(b0, b1)),
                 "cpu_seconds": {k: round(v - c0.get(k, 0.0), 2) for k, v in c1.items()}}
                for (stage, s0, b0, c0, p0), (_n, s1, b1, c1, p1) in zip(self.marks, self.marks[1:], strict=False)]


def ingest(client, rec: StageRecorder, docs: list[tuple[str, str]], timeout: float) -> tuple[dict, float]:
    """One ingestion job, its view read every ``POLL_S`` (the recorder marks each new stage)."""
    rec.seen.clear()
    rec.mark("submit")
    started = time.perf_counter()
    job = submit_ingestion(client.redis, client.celery, "cap", [DocumentInput(text=t, title=title)
                                                                 for title, t in docs], client.settings)
    return follow(client, rec, job["job_id"], started, timeout)


def recluster(client, rec: StageRecorder, timeout: float) -> tuple[dict, float] | None:
    """The ``recluster`` job the watchdog submits once the tenant is quiet, when a job left the whole-graph
    clustering to it (``shared.pipeline.recluster``); None when none is due. Its seconds count from its submission."""
    if client.redis.zscore(recluster_due_key(), "cap") is None:
        return None
    jobs = JobStore(client.redis, "cap")
    deadline = time.monotonic() + client.settings.cluster.recluster_quiet_s + 120
    while True:
        newest = to_str(client.redis.zrevrange(jobs.k.jobs(), 0, 0)[0])
        if jobs.get_field(newest, "kind") == RECLUSTER:
            break
        if time.monotonic() > deadline:
            raise TimeoutError("the recluster job due was not submitted")
        time.sleep(POLL_S)
    rec.seen.clear()
    rec.mark("submit")
    started = time.perf_counter() - (time.time() - float(jobs.get_field(newest, "created_at")))
    return follow(client, rec, newest, started, timeout)


def follow(client, rec: StageRecorder, job_id: str, started: float, timeout: float) -> tuple[dict, float]:
    while True:
        if time.perf_counter() - started > timeout:
            raise TimeoutError(f"ingestion not finished after {timeout} s")
        try:
            view = client.job("cap", job_id)
        except (redis.exceptions.TimeoutError, redis.exceptions.ConnectionError):  # the state Redis is busy (a
            time.sleep(POLL_S)  # large tenant's whole-graph read): the job goes on, and so does the poll
            continue
        rec.poll(view)
        if view and view["status"] in ("succeeded", "failed", "cancelled"):
            break
        time.sleep(POLL_S)
    seconds = time.perf_counter() - started
    rec.mark("end")
    return view, seconds


class QueryProbe:
    """A user querying the tenant while it ingests: a context-only local query ``every_s`` seconds after the last one
    answered, each one's seconds (submit to result) filed under the job running when it was sent (``window``)."""

    def __init__(self, state_url: str, every_s: float):
        self.every_s, self.state_url = every_s, state_url
        self.seconds: dict[int, list[float]] = {}
        self.failed = 0
        self.window = -1  # the job now running (-1: none: no query sent)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="query-probe", daemon=True)

    def __enter__(self) -> QueryProbe:
        if self.every_s > 0:
            self._thread.start()
        return self

    def __exit__(self, *_exc) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(900)

    def _run(self) -> None:
        client, n = LocalClient(self.state_url), 0
        while not self._stop.wait(self.every_s):
            job = self.window
            if job < 0:
                continue
            n += 1
            started = time.perf_counter()
            try:
                status = client.query("cap", QueryParam(query=f"{QUERIES['local']} (probe {n})", mode="local",
                                                        only_need_context=True), timeout=900)["status"]
            except Exception:  # noqa: BLE001 - a busy Redis's timeout counts as a failed query, the probe goes on
                status = "error"
            if status == "succeeded":
                self.seconds.setdefault(job, []).append(time.perf_counter() - started)
            else:
                self.failed += 1
        client.close()

    def summary(self, job: int) -> dict:
        """The queries sent during ``job``: how many, p50, p95 and the slowest, and each one's seconds."""
        got = self.seconds.get(job, [])
        if not got:
            return {"queries": 0}
        return {"queries": len(got), "p50_s": round(percentile(got, 0.5), 3), "p95_s": round(percentile(got, 0.95), 3),
                "max_s": round(max(got), 3), "seconds": [round(x, 3) for x in got]}


def per_view_cost(client, state, job_id: str, n: int = 20) -> dict:
    """The state-Redis commands of one job read by the bench (subtracted from the stages)."""
    before = probe.snapshot(state)
    for _ in range(n):
        client.job("cap", job_id)
    d = probe.delta(before, probe.snapshot(state))
    return {"ops": d["ops"] / n, "by_command": {k: v / n for k, v in d["by_command"].items()},
            "usec_by_command": {k: v / n for k, v in d["usec_by_command"].items()}, "redis_cpu_s": 0}


def measure_queries(client, state, broker, repeat: int) -> list[dict]:
    out = []
    for mode, text in QUERIES.items():
        for only_context in (True, False):
            s0, b0, t0 = probe.snapshot(state), probe.snapshot(broker), time.perf_counter()
            statuses = [client.query("cap", QueryParam(query=f"{text} (run {i} {only_context})", mode=mode,
                                                       only_need_context=only_context), timeout=900)["status"]
                        for i in range(repeat)]
            s = probe.delta(s0, probe.snapshot(state))
            b = probe.broker_messages(probe.delta(b0, probe.snapshot(broker)))
            out.append({"mode": mode, "stage": "context" if only_context else "full", "queries": repeat,
                        "statuses": statuses, "seconds_per_query": round((time.perf_counter() - t0) / repeat, 3),
                        "state_ops_per_query": round(s["ops"] / repeat, 1),
                        "state_by_command": {k: round(v / repeat, 1) for k, v in s["by_command"].items()},
                        "state_redis_cpu_ms_per_query": round(1000 * s["redis_cpu_s"] / repeat, 2),
                        "state_usec_per_query": round(s["usec"] / repeat, 1),
                        "broker_messages_per_query": round(b["messages"] / repeat, 2),
                        "broker_ops_per_query": round(b["ops"] / repeat, 1)})
    return out


def run_size(target: int, fast: bool, args) -> dict:
    """One corpus size. ``fast``: the LLM-free extractor; with ``args.no_llm`` the workers have no LLM at all
    (summaries cut to their budget, extractive reports, the local embedder), the product's LLM-free path."""
    built = corpus(target + args.then_batches * args.then_chunks, args.size_tokens, args.overlap)
    extraction = "none" if args.no_llm else "fast" if fast else "llm"
    with simulator(latency_ms=0.0) as sim, redis_server() as state_url, redis_server() as broker_url:
        llm = None if args.no_llm else sim
        # this process (the readiness check, the submitting client) uses the workers' state and broker: ``Stack``
        # takes the configured broker only for the configured state Redis (``queueing.settings_for``)
        os.environ.update(GRAPHFLEET_REDIS_URL=state_url, GRAPHFLEET_BROKER_URL=broker_url)
        reset_settings_cache()
        env = {"GRAPHFLEET_BROKER_URL": broker_url, "GRAPHFLEET_CHUNKING__SIZE_TOKENS": args.size_tokens,
               "GRAPHFLEET_CHUNKING__OVERLAP_TOKENS": args.overlap}
        if fast:  # main() passes fast for every --no-llm run
            env["GRAPHFLEET_EXTRACTION__STRATEGY"] = "fast"
        with stack(state_url, llm, args.concurrency, args.processes, **env) as st:
            client = LocalClient(state_url)
            state, broker = connect(state_url), connect(broker_url)
            b_idle = probe.snapshot(broker)
            time.sleep(5.0)
            idle = probe.delta(b_idle, probe.snapshot(broker))
            mem0 = probe.memory(state)
            rec = StageRecorder(st, sim, state, broker, state_url)
            sim0 = sim_stats(sim)
            views, jobs = [], []
            with QueryProbe(state_url, args.probe_queries) as querying:
                for i, docs in enumerate(batches(built, args.batch_chunks, (args.then_batches, args.then_chunks))):
                    before, b_before, chunks_before = probe.snapshot(state), probe.snapshot(broker), stored(client)
                    querying.window = i
                    view, seconds = ingest(client, rec, docs, args.timeout)
                    views.append(view)
                    jobs.append(job_record(i, chunks_before, stored(client), seconds, view,
                                           probe.delta(before, probe.snapshot(state)),
                                           probe.broker_messages(probe.delta(b_before, probe.snapshot(broker)))))
                    print(json.dumps(jobs[-1]), file=sys.stderr, flush=True)  # a long run can be read as it goes
            if args.probe_queries > 0:
                for record in jobs:
                    record["queries_meanwhile"] = querying.summary(record["job"])
                jobs[-1]["queries_meanwhile"]["failed_in_run"] = querying.failed
            before, b_before, held = probe.snapshot(state), probe.snapshot(broker), stored(client)
            if (deferred := recluster(client, rec, args.timeout)) is not None:  # per chunk: of the chunks held
                views.append(deferred[0])
                jobs.append({**job_record(len(jobs), 0, held, deferred[1], deferred[0],
                                          probe.delta(before, probe.snapshot(state)),
                                          probe.broker_messages(probe.delta(b_before, probe.snapshot(broker)))),
                             "kind": RECLUSTER, "chunks_before": held, "chunks_added": 0})
            sim1 = sim_stats(sim)
            mem1, families = probe.memory(state), probe.memory_by_family(state, "cap")
            stats = client.stats("cap")
            vectors = {sub.split(":", 1)[1]: int(state.hlen(f"gf:t:{{cap}}:{sub}") or 0)
                       for sub in families["subfamilies"] if sub.startswith("vec:")}
            per_view = per_view_cost(client, state, views[-1]["id"])
            queries = measure_queries(client, state, broker, args.query_repeat)
            mem2, broker_mem = probe.memory(state), probe.memory(broker)
    usage = [v["usage"] for v in views]
    return {"bench": "capacity", "target_chunks": target, "extraction": extraction,
            "size_tokens": args.size_tokens, "overlap_tokens": args.overlap, "processes": args.processes,
            "concurrency": args.concurrency, "status": ",".join(sorted({v["status"] for v in views})),
            "seconds": round(sum(j["seconds"] for j in jobs), 2), "jobs": jobs,
            "documents": len(built["docs"]), "corpus_tokens": built["tokens"],
            "renamed_copies": built["renamed_copies"], **stats,
            "communities": sum(stats["communities_by_level"].values()), "vectors": vectors,
            "memory_before": mem0, "memory_after_ingest": mem1, "memory_after_queries": mem2,
            "broker_memory_after": broker_mem, "families": families,
            "stages": rec.segments(per_view), "poll_cost_per_view": per_view["ops"],
            "broker_idle_ops_per_s": round(idle["ops"] / 5.0, 1), "broker_idle_by_command": idle["by_command"],
            "llm_calls": sum(u["calls"] for u in usage),
            **{k: sum(u[k] for u in usage) for k in ("prompt_tokens", "completion_tokens")},
            "calls_by_stage": by_stage(usage, ("calls",)),
            "tokens_by_stage": by_stage(usage, ("prompt_tokens", "completion_tokens")),
            "sim_embedding_calls": sim1["embeddings"]["calls"] - sim0["embeddings"]["calls"],
            "queries": queries}


def stored(client) -> int:
    return int(client.redis.scard("gf:t:{cap}:chunks") or 0)


def job_record(i: int, before: int, after: int, seconds: float, view: dict, state: dict, broker: dict) -> dict:
    """One ingestion job of a batched run: what it cost while the tenant already held ``before`` chunks
    (the bench's own job reads, ~12 commands every 0.25 s, are included here)."""
    n = max(1, after - before)
    return {"job": i, "chunks_before": before, "chunks_added": after - before, "status": view["status"],
            "seconds": round(seconds, 2), "state_ops_per_chunk": round(state["ops"] / n, 1),
            "state_usec_per_chunk": round(state["usec"] / n, 1),
            "state_redis_cpu_us_per_chunk": round(1e6 * state["redis_cpu_s"] / n, 1),
            "top_usec_per_chunk": {k: round(v / n, 1) for k, v in list(state["usec_by_command"].items())[:6]},
            "broker_messages_per_chunk": round(broker["messages"] / n, 2),
            "stage_seconds": stage_seconds(view, seconds),
            "llm_by_stage": {stage: {k: v.get(k, 0) for k in ("calls", "prompt_tokens")}
                             for stage, v in (view.get("usage") or {}).get("by_stage", {}).items()}}


def stage_seconds(view: dict, seconds: float) -> dict[str, float]:
    """Seconds from each stage's first start to the next's (the last: to the job's end), the newest stage running."""
    starts = sorted((t, s) for s, t in (view.get("stage_times") or {}).items())
    if not starts:
        return {}
    ends = [t for t, _s in starts[1:]] + [max(seconds, starts[-1][0])]
    return {s: round(end - t, 1) for (t, s), end in zip(starts, ends, strict=True)}


def by_stage(usage: list[dict], fields: tuple[str, ...]) -> dict[str, int]:
    out: dict[str, int] = {}
    for u in usage:
        for stage, v in u["by_stage"].items():
            out[stage] = out.get(stage, 0) + sum(v.get(f, 0) for f in fields)
    return out


def main() -> None:
    ap = parser(__doc__, processes=1, concurrency=16)
    ap.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000, 50000], help="target chunks per run")
    ap.add_argument("--llm-up-to", type=int, default=1000, help="LLM extraction up to this size, fast above")
    ap.add_argument("--both-at", type=int, nargs="*", default=[], help="sizes also run with the other extraction")
    ap.add_argument("--size-tokens", type=int, default=300)
    ap.add_argument("--overlap", type=int, default=30)
    ap.add_argument("--query-repeat", type=int, default=3)
    ap.add_argument("--timeout", type=float, default=3600.0)
    ap.add_argument("--batch-chunks", type=int, default=0,
                    help="ingest in consecutive jobs of about this many chunks (0: one job)")
    ap.add_argument("--then-batches", type=int, default=0,
                    help="after those jobs, this many smaller ones of --then-chunks chunks each (a tenant that holds "
                         "the size receiving a small batch a day)")
    ap.add_argument("--then-chunks", type=int, default=1000)
    ap.add_argument("--probe-queries", type=float, default=0.0,
                    help="while the jobs run, a context-only local query every this many seconds (0: none); each "
                         "job's record gets their seconds (queries_meanwhile)")
    ap.add_argument("--no-llm", action="store_true",
                    help="workers with no LLM configured (LLM-free extraction, summaries and reports; every size)")
    args = ap.parse_args()
    emit({"bench": "machine", **machine(), "versions": own_versions(), "command": "python -m bench.suites.capacity",
          "args": {k: v for k, v in vars(args).items() if k != "out"}, "started": time.time()}, args.out)
    for target in args.sizes:
        fast = target > args.llm_up_to or args.no_llm
        for mode in [fast, *([not fast] if target in args.both_at and not args.no_llm else [])]:
            emit(run_size(target, mode, args), args.out)


if __name__ == "__main__":
    main()
