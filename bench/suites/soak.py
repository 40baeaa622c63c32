"""Many small tenants through the gateway with the graphfleet client, round-robin: each tenant is created with a
key, ingests one short document (two HotpotQA passages) and asks a local query (``query_s``); then every tenant
asks again in the same order (``requery_s``: the query workers serve tenant after tenant). Every process's RSS is
sampled (peak, and at the end of the warm-up: a tenth of the tenants); at the end each tenant is audited: its usage
ledger (``GET /v1/usage``) against the sum of its jobs' usage, its document processed, its three jobs. With
``--faults``: a worker process (each in turn, in a shuffled order) SIGKILLed every ``--kill-every`` seconds, the
gateway SIGKILLed once a third of the tenants have ingested and the state Redis restarted (from its append-only
file) at two thirds; clients retry what the service says is retryable, and a refused connection.

    .venv/bin/python -m bench.suites.soak [--tenants 1000] [--clients 4] [--faults] [--out FILE]
"""

from __future__ import annotations

import itertools
import os
import random
import signal
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from bench.harness.cpu import stack_processes
from bench.harness.datasets import load_named_set
from bench.harness.results import emit, machine, parser, percentile, timed
from bench.harness.stacks import simulator
from graphfleet import ApiError, Client, ConflictError, TransportError
from graphfleet_cli.stack import Stack
from shared.infra.redis.conn import EmbeddedRedis, free_port

ADMIN = "adm-bench-soak"
TOTALS = ("calls", "prompt_tokens", "completion_tokens")


def _retried(out: dict, fn, *args, **kwargs):
    """``fn``'s answer through the graphfleet client, which retries 429 and 503 itself; a refused connection (the
    gateway restarting) is retried here, as any client would with an Idempotency-Key. An error answer is recorded
    in ``out["errors"]`` (None returned); 409 (a retried create that had succeeded) is not an error."""
    for _ in range(300):
        try:
            return fn(*args, **kwargs)
        except TransportError:
            out["retries"].append(fn.__name__)
            time.sleep(1)
        except ConflictError:
            return None
        except ApiError as exc:
            out["errors"].append(f"{fn.__name__}: {exc.status} {exc.code}: {exc.message}")
            return None
    raise RuntimeError(f"{fn.__name__}: gateway unreachable for 300 s")


def _tenant(admin: Client, out: dict, i: int, docs: list[tuple[str, str]], url: str) -> dict:
    """Tenant ``i``: created with a key, its document ingested, its first query."""
    tenant, (title, text) = f"soak-{i:04d}", docs[i % len(docs)]
    _retried(out, admin.create_tenant, tenant, limits={"requests_per_minute": 100_000})
    gf = Client(url, _retried(out, admin.create_key, tenant, "soak").api_key, max_retries=60, max_retry_delay=5)
    started = time.perf_counter()
    job = _retried(out, gf.ingest, [{"id": f"doc-{i}", "title": title, "text": text}], idempotency_key=f"doc-{i}")
    out["jobs"].append(_retried(out, gf.wait_job, job.job_id, poll=30).status)
    out["ingest_s"].append(time.perf_counter() - started)
    t = {"tenant": tenant, "client": gf, "title": title}
    _query(out, t, 0)
    return t


def _query(out: dict, t: dict, round_: int) -> None:
    result, seconds = timed(_retried, out, t["client"].query, f"What is {t['title']}?", idempotency_key=f"q-{round_}")
    out["jobs"].append(result.status if result else "error")
    out["query_s" if round_ == 0 else "requery_s"].append(seconds)


def _audit(out: dict, t: dict) -> list[str]:
    """What is wrong with the tenant at the end: its ledger against the sum of its jobs' usage (the fields that
    differ), its one document not there once and processed, a job count other than its ingestion and two queries."""
    gf, name = t["client"], t["tenant"]
    ledger = _retried(out, gf.usage, from_=0).totals
    jobs = _retried(out, gf.list_jobs, limit=100).items
    summed = {f: sum(j.usage.get(f, 0) for j in jobs) for f in TOTALS}
    gaps = [f"{name} {f}: ledger {ledger.get(f)} jobs {summed[f]}" for f in TOTALS if ledger.get(f) != summed[f]]
    docs = [d.status for d in _retried(out, gf.list_documents).items]
    if docs != ["processed"] or len(jobs) != 3:
        gaps.append(f"{name}: documents {docs}, {len(jobs)} jobs")
    return gaps


def _rss(proc) -> int:
    try:
        return proc.memory_info().rss
    except Exception:  # noqa: BLE001 - the process exited (killed, restarted) since it was listed
        return 0


class Sampler(threading.Thread):
    """Every process's RSS (a worker with its pool children, the gateway, Redis, the simulator) every 2 s: the
    peak per label, overall and after warm-up (once ``warm`` is set)."""

    def __init__(self, stack: Stack, urls: tuple[str, str]):
        super().__init__(daemon=True)
        self.stack, self.urls, self.stop, self.warm = stack, urls, threading.Event(), threading.Event()
        self.peak: dict[str, int] = {}
        self.warm_at: dict[str, int] = {}

    def run(self) -> None:
        while not self.stop.wait(2.0):
            for label, procs in stack_processes(self.stack, *self.urls).items():
                rss = sum(_rss(p) for p in procs)
                self.peak[label] = max(self.peak.get(label, 0), rss)
                if self.warm.is_set():
                    self.warm_at.setdefault(label, rss)


class Faults(threading.Thread):
    """The fault schedule (``--faults``): a worker process SIGKILLed every ``--kill-every`` s, each in turn in a
    shuffled order (the stack's supervisor restarts it); at a third of the tenants the gateway SIGKILLed, at two
    thirds the state Redis restarted. Without ``--faults`` it only marks the end of the warm-up (a tenth)."""

    def __init__(self, stack: Stack, redis: EmbeddedRedis, sampler: Sampler, args):
        super().__init__(daemon=True)
        self.stack, self.redis, self.sampler, self.args = stack, redis, sampler, args
        self.done, self.lock, self.log, self.fired = threading.Event(), threading.Lock(), [], set()
        workers = [name for name, _p in stack.procs if name != "gateway"]
        self.order = itertools.cycle(random.Random(7).sample(workers, len(workers)))

    def kill(self, name: str) -> None:
        os.kill(dict(self.stack.procs)[name].pid, signal.SIGKILL)
        self.log.append(f"{time.strftime('%H:%M:%S')} SIGKILL {name}")

    def run(self) -> None:
        while self.args.faults and not self.done.wait(self.args.kill_every):
            self.kill(next(self.order))

    def milestone(self, finished: int) -> None:
        """``finished`` tenants have ingested."""
        n = self.args.tenants
        with self.lock:
            if finished >= n // 10:
                self.sampler.warm.set()
            if self.args.faults and finished >= n // 3 and "gateway" not in self.fired:
                self.fired.add("gateway")
                self.kill("gateway")
            if self.args.faults and finished >= 2 * n // 3 and "redis" not in self.fired:
                self.fired.add("redis")
                self.redis.stop()
                self.redis.start()
                self.log.append(f"{time.strftime('%H:%M:%S')} redis restarted")


def _clients(url: str, args, faults: Faults) -> dict:
    """``--clients`` clients, each over its share of the tenants: every tenant ingests and queries, then every
    tenant queries again in the same order; then each tenant is audited."""
    corpus = load_named_set("hotpotqa")
    keys = sorted(corpus.passages)
    docs = [(a, f"{corpus.passages[a]}\n\n{corpus.passages[b]}") for a, b in zip(keys[::2], keys[1::2], strict=False)]
    out = {"jobs": [], "ingest_s": [], "query_s": [], "requery_s": [], "errors": [], "retries": [], "gaps": []}
    admin = Client(url, ADMIN, max_retries=60, max_retry_delay=5)

    def client_run(indexes: range) -> None:
        tenants = []
        for i in indexes:
            tenants.append(_tenant(admin, out, i, docs, url))
            faults.milestone(len(out["ingest_s"]))
        for t in tenants:
            _query(out, t, 1)
        out["gaps"] += [g for t in tenants for g in _audit(out, t)]

    with ThreadPoolExecutor(args.clients) as pool:
        list(pool.map(client_run, [range(k, args.tenants, args.clients) for k in range(args.clients)]))
    return out


def run(args) -> None:
    env = {"GRAPHFLEET_ADMIN_KEY": ADMIN, "GRAPHFLEET_LLM_API_KEY": "sk-bench"}
    with simulator(latency_ms=args.latency) as llm, tempfile.TemporaryDirectory() as tmp:
        redis = EmbeddedRedis(Path(tmp) / "redis").start()  # persisted: a restart reloads its append-only file
        stack = Stack(data_dir=Path(tmp), redis_url=redis.url, gateway_port=free_port(), processes=args.processes,
                      extra_env={**env, "GRAPHFLEET_LLM_BASE_URL": llm}).start()
        sampler = Sampler(stack, (llm, redis.url))
        faults = Faults(stack, redis, sampler, args)
        started = time.perf_counter()
        sampler.start()
        faults.start()
        try:
            out = _clients(stack.gateway_url, args, faults)
        finally:
            faults.done.set()
            sampler.stop.set()
            restarts = stack.supervisor.restarts if stack.supervisor else None
            stack.stop()
            redis.stop()
    mib = lambda b: round(b / 2**20, 1)  # noqa: E731
    emit({"bench": "soak", "tenants": args.tenants, "clients": args.clients, "faults": faults.log,
          "restarts": restarts, "wall_s": round(time.perf_counter() - started, 1), "jobs": len(out["jobs"]),
          "jobs_not_succeeded": [s for s in out["jobs"] if s != "succeeded"], "client_errors": out["errors"],
          "retries": len(out["retries"]), "audit_gaps": out["gaps"],
          **{f"{k}_p{q}": round(percentile(out[k], q / 100), 3) for k in ("ingest_s", "query_s", "requery_s")
             for q in (50, 95)},
          "rss_peak_mib": {k: mib(v) for k, v in sorted(sampler.peak.items())},
          "rss_after_warmup_mib": {k: mib(v) for k, v in sorted(sampler.warm_at.items())}, "machine": machine()},
         args.out)


def main() -> None:
    ap = parser(__doc__, latency=0.0, processes="1")
    ap.add_argument("--tenants", type=int, default=1000)
    ap.add_argument("--clients", type=int, default=4, help="tenants served at once (each client its own share)")
    ap.add_argument("--faults", action="store_true", help="the fault schedule: kills and restarts")
    ap.add_argument("--kill-every", type=float, default=30.0, help="seconds between two worker kills")
    run(ap.parse_args())


if __name__ == "__main__":
    main()
