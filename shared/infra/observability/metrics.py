"""Prometheus metrics: LLM usage (fed by :class:`shared.infra.tenancy.usage.UsageRecorder`), pipeline tasks, jobs.

Multiprocess mode: Celery workers and the gateway are separate processes. When
``PROMETHEUS_MULTIPROC_DIR`` is set (before this module builds its metrics, see :func:`metrics`), every
process writes its samples to files there and :func:`metrics_response` aggregates all of them; the
directory is wiped when a stack starts and dead processes are folded into archive files
(:mod:`shared.infra.observability.metrics_multiproc`). Without the variable (tests, a single process) the default
in-process registry is used.

Tenant ids are never labels by default. Setting ``GRAPHFLEET_METRICS_TENANT_ALLOWLIST=a,b`` adds a
``tenant`` label to the request/token/cost/cache-hit counters, with tenants outside the list folded
into ``"other"``. Every process of a fleet must see the same value (the label set is fixed per process).
Names, labels and their OpenTelemetry GenAI equivalents: ``docs/observability.md``.
"""

from __future__ import annotations

import atexit
import os
import threading
from collections.abc import Iterable

from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, CollectorRegistry, Counter, Gauge, Histogram, values
from prometheus_client import generate_latest as _generate_latest
from prometheus_client.metrics_core import Metric
from prometheus_client.utils import floatToGoString

from shared.config import get_settings
from shared.infra.observability.metrics_multiproc import (  # noqa: F401 - re-exported
    MULTIPROC_ENV,
    FoldingCollector,
    fold_dead,
    fold_process,
    multiproc_dir,
    prepare_multiproc_dir,
)
from shared.infra.tenancy.tiers import DEFAULT_TIER

TENANT_ALLOWLIST_ENV = "GRAPHFLEET_METRICS_TENANT_ALLOWLIST"  # ``Settings.metrics_tenant_allowlist``
OTHER_TENANT = "other"
OTHER = "other"

# The stage label is bounded to these values; query phases outside them are folded (STAGE_ALIASES).
STAGES = ("extract", "glean", "summarize", "report", "keywords", "map", "reduce", "answer", "embed")
STAGE_ALIASES = {"rate": "map", "analysis": "answer", "repair": "answer", "refine": "answer",
                 "community_report": "report", "query_answer": "answer"}

# Every metric family this module exports (exposition names). Dashboards and alerts may only use these.
METRIC_NAMES: frozenset[str] = frozenset({
    "graphfleet_llm_requests_total",
    "graphfleet_llm_tokens_total",
    "graphfleet_llm_cost_usd_total",
    "graphfleet_llm_request_duration_seconds",
    "graphfleet_llm_errors_total",
    "graphfleet_llm_retries_total",
    "graphfleet_llm_cache_hits_total",
    "graphfleet_tasks_total",
    "graphfleet_task_duration_seconds",
    "graphfleet_task_queue_wait_seconds",
    "graphfleet_tasks_in_progress",
    "graphfleet_queue_depth",
    "graphfleet_queue_unacked",
    "graphfleet_queue_consumers",
    "graphfleet_jobs_total",
    "graphfleet_job_duration_seconds",
    "graphfleet_chunks_processed_total",
    "graphfleet_job_resumes_total",
    "graphfleet_query_cache_warmup_seconds",
    "graphfleet_http_requests_total",
    "graphfleet_http_request_duration_seconds",
})
# Families read from Redis at scrape time (observability/metrics_collectors.py), not by this module's objects.
SCRAPE_TIME_NAMES = frozenset({"graphfleet_queue_depth", "graphfleet_queue_unacked", "graphfleet_queue_consumers"})
# Label value of the zero-valued sample a family gets while it has no sample of its own (see declared_families).
PLACEHOLDER = "none"

LLM_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 30.0, 60.0, 120.0)
TASK_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1200.0)
HTTP_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0)
JOB_BUCKETS = (0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1200.0, 1800.0, 3600.0, 7200.0, 14400.0)


def tenant_allowlist(settings=None) -> frozenset[str]:
    """Tenants allowed as a metric label: ``Settings.metrics_tenant_allowlist`` (``TENANT_ALLOWLIST_ENV``,
    comma-separated), of ``settings`` or else this process's settings."""
    return (settings or get_settings()).metrics_tenant_allowlist


def tenant_label(tenant: str, allowlist: frozenset[str]) -> str:
    return tenant if tenant in allowlist else OTHER_TENANT


def stage_label(stage: str | None) -> str:
    stage = STAGE_ALIASES.get(stage or "", stage or "")
    return stage if stage in STAGES else OTHER


class _Metrics:
    """All metric objects of a process; built once, on first use (see :func:`metrics`)."""

    def __init__(self, allowlist: frozenset[str]):
        self.allowlist = allowlist
        t = ["tenant"] if allowlist else []
        base = ["model", "stage", "queue", "tier", *t]
        self.llm_requests = Counter("graphfleet_llm_requests", "LLM and embedding calls (attempts, cache hits)",
                                    [*base, "kind"])
        self.llm_tokens = Counter("graphfleet_llm_tokens", "LLM tokens by direction (input|output)",
                                  ["direction", *base])
        self.llm_cost = Counter("graphfleet_llm_cost_usd", "LLM spend in USD", base)
        self.llm_duration = Histogram("graphfleet_llm_request_duration_seconds",
                                      "LLM call latency (cache hits excluded)", ["model", "stage", "queue"],
                                      buckets=LLM_BUCKETS)
        self.llm_errors = Counter("graphfleet_llm_errors", "Failed LLM attempts by cause (HTTP 429 = rate_limited)",
                                  ["model", "stage", "queue", "error"])
        self.llm_retries = Counter("graphfleet_llm_retries", "LLM attempts that were retries",
                                   ["model", "stage", "queue"])
        self.llm_cache_hits = Counter("graphfleet_llm_cache_hits", "LLM calls answered from the cache", base)
        self.tasks = Counter("graphfleet_tasks", "Celery tasks by outcome (started|succeeded|failed|retried)",
                             ["queue", "task", "outcome"])
        self.task_duration = Histogram("graphfleet_task_duration_seconds", "Celery task run time",
                                       ["queue", "task"], buckets=TASK_BUCKETS)
        self.task_queue_wait = Histogram("graphfleet_task_queue_wait_seconds",
                                         "Time a task's message waited between being ready (sent, or its "
                                         "countdown over) and the task's start",
                                         ["queue", "task"], buckets=TASK_BUCKETS)
        self.tasks_in_progress = Gauge("graphfleet_tasks_in_progress", "Celery tasks running now",
                                       ["queue", "task"], multiprocess_mode="livesum")
        self.jobs = Counter("graphfleet_jobs", "Jobs by kind and status (submitted or a final status)",
                            ["kind", "status", "tier"])
        self.job_duration = Histogram("graphfleet_job_duration_seconds", "End-to-end job latency (submit to done)",
                                      ["kind", "status", "tier"], buckets=JOB_BUCKETS)
        self.chunks = Counter("graphfleet_chunks_processed", "Chunks extracted (ok|failed)", ["outcome"])
        self.job_resumes = Counter("graphfleet_job_resumes", "Stalled jobs whose lost steps the watchdog re-enqueued",
                                   ["kind", "stage"])
        self.cache_warmups = Histogram("graphfleet_query_cache_warmup_seconds",
                                       "Query worker caches rebuilt after an index update (one per tenant and process)",
                                       ["queue"], buckets=TASK_BUCKETS)
        self.http_requests = Counter("graphfleet_http_requests", "Gateway HTTP requests by route template and status "
                                     "class (2xx..5xx)", ["route", "method", "status"])
        self.http_duration = Histogram("graphfleet_http_request_duration_seconds",
                                       "Gateway HTTP request latency by route template", ["route", "method"],
                                       buckets=HTTP_BUCKETS)

    def families(self) -> list:
        """Every metric object of this process (for the zero-valued placeholders of declared_families)."""
        return [v for v in vars(self).values() if hasattr(v, "_labelnames")]


_lock = threading.Lock()
_metrics: _Metrics | None = None


def _select_value_class() -> None:
    """Use multiprocess values when ``PROMETHEUS_MULTIPROC_DIR`` is set now, even if prometheus_client was
    imported before it was set (prometheus_client itself decides at import)."""
    if not multiproc_dir():
        return
    if values.ValueClass is values.MutexValue:
        values.ValueClass = values.MultiProcessValue()
    atexit.register(_fold_self)


def _fold_self() -> None:
    path = multiproc_dir()
    if path and os.path.isdir(path):
        fold_process(os.getpid(), path)


def metrics() -> _Metrics:
    global _metrics
    if _metrics is None:
        with _lock:
            if _metrics is None:
                _select_value_class()
                _metrics = _Metrics(tenant_allowlist())
    return _metrics


def join_multiproc_dir(path: str) -> bool:
    """Make this process write to the host's metrics directory (e.g. a CLI talking to a local stack).
    Only possible before this process built its metrics; returns whether it joined."""
    if _metrics is not None or multiproc_dir():
        return multiproc_dir() == str(path)
    if not os.path.isdir(path):
        return False
    os.environ[MULTIPROC_ENV] = str(path)
    return True


def _label(value: str | None, default: str = "none", limit: int = 64) -> str:
    return (value or default)[:limit]


def _tier_label(tier: str | None) -> str:
    """A tier as a metric label: the default tier when unset, at most 32 characters."""
    return _label(tier, DEFAULT_TIER, 32)


def usage_listener(rec) -> None:
    """UsageRecorder listener: one call (or failed attempt / cache hit) -> counters and latency."""
    m = metrics()
    model, stage, queue = _label(rec.model), stage_label(rec.stage), _label(rec.queue)
    labels = {"model": model, "stage": stage, "queue": queue,
              "tier": _tier_label(getattr(rec, "tier", None))}
    if m.allowlist:
        labels["tenant"] = tenant_label(rec.tenant, m.allowlist)
    m.llm_requests.labels(kind=_label(rec.kind, "chat"), **labels).inc()
    if rec.cache_hit:
        m.llm_cache_hits.labels(**labels).inc()
    else:
        m.llm_duration.labels(model=model, stage=stage, queue=queue).observe(max(0.0, rec.latency_s))
    if rec.prompt_tokens:
        m.llm_tokens.labels(direction="input", **labels).inc(rec.prompt_tokens)
    if rec.completion_tokens:
        m.llm_tokens.labels(direction="output", **labels).inc(rec.completion_tokens)
    if rec.cost_usd:
        m.llm_cost.labels(**labels).inc(rec.cost_usd)
    if rec.error:
        m.llm_errors.labels(model=model, stage=stage, queue=queue, error=_label(rec.error, limit=40)).inc()
    if rec.retries:
        m.llm_retries.labels(model=model, stage=stage, queue=queue).inc()


def prime_query_series(model: str, queue: str, task: str, tenant_tiers: dict[str, str]) -> None:
    """Create, at zero, the series a query worker's first answer writes to (its answer call, its task, its job)
    for each ``tenant -> tier`` given. Prometheus's advice is to initialise the label sets known in advance
    (``rate`` and alerts see them before the first event); and in multiprocess mode each new child maps its
    values when created, a cost for each of a query's series that the first query would otherwise pay. Nothing is
    counted or observed."""
    m = metrics()
    model, queue = _label(model), _label(queue)
    for tenant, tier in tenant_tiers.items():
        tier = _tier_label(tier)
        labels = {"model": model, "stage": "answer", "queue": queue, "tier": tier}
        if m.allowlist:
            labels["tenant"] = tenant_label(tenant, m.allowlist)
        m.llm_requests.labels(kind="chat", **labels)
        for direction in ("input", "output"):
            m.llm_tokens.labels(direction=direction, **labels)
        m.llm_cost.labels(**labels)
        m.jobs.labels(kind="query", status="succeeded", tier=tier)
        m.job_duration.labels(kind="query", status="succeeded", tier=tier)
    m.llm_duration.labels(model=model, stage="answer", queue=queue)
    for outcome in ("started", "succeeded"):
        m.tasks.labels(queue=queue, task=task, outcome=outcome)
    m.task_duration.labels(queue=queue, task=task)
    m.task_queue_wait.labels(queue=queue, task=task)
    m.tasks_in_progress.labels(queue=queue, task=task)


# ------------------------------------------------------------------ pipeline helpers
def record_task(queue: str, task: str, outcome: str) -> None:
    metrics().tasks.labels(queue=queue, task=task, outcome=outcome).inc()


def observe_task_duration(queue: str, task: str, seconds: float) -> None:
    metrics().task_duration.labels(queue=queue, task=task).observe(max(0.0, seconds))


def observe_task_queue_wait(queue: str, task: str, seconds: float) -> None:
    """A task's wait between its message being ready (its publish, or its countdown's end) and its start (0 when
    the clocks of two hosts disagree)."""
    metrics().task_queue_wait.labels(queue=queue, task=task).observe(max(0.0, seconds))


def prime_gateway_series(routes: Iterable[tuple[str, str]], tiers: Iterable[str] = (DEFAULT_TIER,)) -> None:
    """Create, at zero, the series a gateway's first submissions and polls write: each ``(route template, method)``
    answered 2xx (its count and its latency), and the submitted jobs of each kind and tier. As
    :func:`prime_query_series` does for a query worker: ``rate`` and alerts see them before the first request, and
    the first request does not pay for building the metric objects and mapping their multiprocess values.
    Nothing is counted or observed."""
    m = metrics()
    for route, method in routes:
        m.http_requests.labels(route=route, method=method, status="2xx")
        m.http_duration.labels(route=route, method=method)
    for tier in tiers:
        for kind in ("query", "ingest"):
            m.jobs.labels(kind=kind, status="submitted", tier=_tier_label(tier))


def record_job_submitted(kind: str, tier: str = DEFAULT_TIER) -> None:
    metrics().jobs.labels(kind=kind, status="submitted", tier=_tier_label(tier)).inc()


def record_job_finished(kind: str, status: str, seconds: float | None, tier: str = DEFAULT_TIER) -> None:
    """A job reached a final status (succeeded, failed, canceled); ``seconds`` = created -> finished."""
    m = metrics()
    tier = _tier_label(tier)
    m.jobs.labels(kind=kind, status=status, tier=tier).inc()
    if seconds is not None:
        m.job_duration.labels(kind=kind, status=status, tier=tier).observe(max(0.0, seconds))


def record_job_resumed(kind: str, stage: str) -> None:
    metrics().job_resumes.labels(kind=_label(kind, "unknown", 16), stage=_label(stage, "unknown", 32)).inc()


def record_http(route: str, method: str, status: int, seconds: float) -> None:
    m = metrics()
    m.http_requests.labels(route=route, method=method, status=f"{status // 100}xx").inc()
    m.http_duration.labels(route=route, method=method).observe(max(0.0, seconds))


def observe_cache_warmup(seconds: float, queue: str = "query") -> None:
    metrics().cache_warmups.labels(queue=_label(queue)).observe(max(0.0, seconds))


def record_chunks(count: int = 1, outcome: str = "ok") -> None:
    if count:
        metrics().chunks.labels(outcome=outcome).inc(count)


# ------------------------------------------------------------------ multiprocess + exposition
def mark_dead(pid: int | None = None) -> None:
    """A process of this host exited: fold its counters into the archive, drop its live gauges."""
    path = multiproc_dir()
    if path and os.path.isdir(path):
        fold_process(pid or os.getpid(), path)


def scrape_registry(redis=None, queues: list[str] | None = None) -> CollectorRegistry:
    """A registry for scrapes: all processes' samples (+ queue depths when ``redis`` is given)."""
    path = multiproc_dir()
    registry = CollectorRegistry()
    registry.register(_Declared(FoldingCollector(path) if path else _SingleProcess()))
    if redis is not None:
        from shared.infra.observability.metrics_collectors import QueueDepthCollector

        registry.register(QueueDepthCollector(redis, queues))
    return registry


def metrics_response(redis=None, queues: list[str] | None = None) -> tuple[bytes, str]:
    """``(body, content_type)`` for a /metrics endpoint, aggregated over every process of this host."""
    return _generate_latest(scrape_registry(redis, queues)), CONTENT_TYPE_LATEST


def start_metrics_server(port: int, addr: str = "0.0.0.0", redis=None) -> None:
    """Serve :func:`scrape_registry` on ``port`` from a daemon thread (worker hosts without a gateway)."""
    from prometheus_client import start_http_server

    start_http_server(port, addr=addr, registry=scrape_registry(redis))


def declared_families(skip: set[str] | frozenset[str] = frozenset()) -> list[Metric]:
    """One zero-valued sample (every label ``"none"``) per family of :class:`_Metrics` not in ``skip``, so
    every family exists from the first scrape: ``absent()`` alerts and ``rate()`` panels see 0, not nothing.
    Emitted at scrape time only (never written to the multiprocess files)."""
    out = []
    for obj in metrics().families():
        name, kind, labels = obj._name, obj._type, list(obj._labelnames)
        if name in skip:
            continue
        fam = Metric(name, obj._documentation, kind)
        zero = dict.fromkeys(labels, PLACEHOLDER)
        if kind == "histogram":
            for bound in obj._upper_bounds:
                fam.add_sample(f"{name}_bucket", {**zero, "le": floatToGoString(bound)}, 0.0)
            fam.add_sample(f"{name}_count", zero, 0.0)
            fam.add_sample(f"{name}_sum", zero, 0.0)
        else:
            fam.add_sample(f"{name}_total" if kind == "counter" else name, zero, 0.0)
        out.append(fam)
    return out


class _Declared:
    """Yields the wrapped collector's families, then a placeholder for each declared family that had no sample."""

    def __init__(self, inner):
        self.inner = inner

    def collect(self):
        seen = set()
        for fam in self.inner.collect():
            if fam.samples:
                seen.add(fam.name)
                yield fam
        yield from declared_families(seen)


class _SingleProcess:
    """Re-exports the default registry (single-process mode) inside a per-scrape registry."""

    def collect(self):
        yield from REGISTRY.collect()
