"""Task names, queues and the Celery configuration shared by workers and enqueuers.

The gateway and the CLI enqueue by task *name* through :func:`make_celery`; they never import
``workers``.
"""

from __future__ import annotations

from celery import Celery
from kombu import Queue

from shared.infra.keys import Keys
from shared.infra.redis_conn import is_tls, tls_options

PARSE = "graphfleet.parse_document"
CHUNK = "graphfleet.chunk_document"
EXTRACT = "graphfleet.extract_chunk"
PLAN_MERGE = "graphfleet.plan_merge"
MERGE = "graphfleet.merge_batch"
CLUSTER = "graphfleet.cluster"
PLAN_REPORTS = "graphfleet.plan_reports"
REPORT = "graphfleet.report_batch"
INDEX = "graphfleet.index"
FINALIZE = "graphfleet.finalize"
DELETE_DOCUMENT = "graphfleet.delete_document"
QUERY = "graphfleet.query"
GLOBAL_MAP = "graphfleet.global_map"
GLOBAL_REDUCE = "graphfleet.global_reduce"
QUERY_DEADLINE = "graphfleet.query_deadline"

ROUTES: dict[str, str] = {
    PARSE: "parser",
    CHUNK: "chunker",
    EXTRACT: "extractor",
    PLAN_MERGE: "merger",
    MERGE: "merger",
    CLUSTER: "clusterer",
    PLAN_REPORTS: "reporter",
    REPORT: "reporter",
    INDEX: "indexer",
    FINALIZE: "merger",
    DELETE_DOCUMENT: "chunker",
    QUERY: "query",
    GLOBAL_MAP: "map_analyst",
    GLOBAL_REDUCE: "reducer",
    QUERY_DEADLINE: "reducer",
}

QUEUES = sorted(set(ROUTES.values()))
LLM_QUEUES = {"extractor", "merger", "reporter", "query", "map_analyst", "reducer", "indexer"}

# Worker groups started by ``graphfleet up``: (name, queues, pool). The merger and the clusterer run on
# ``prefork``, the only pool where Celery enforces the soft/hard time limits (a pool child is signalled, then
# killed); the LLM-bound groups run on ``threads``, where a task is bounded by the LLM client's timeout and
# retries (docs/reliability.md). docker-compose.yml uses the same pools.
WORKER_GROUPS: list[tuple[str, list[str], str]] = [
    ("ingest", ["parser", "chunker", "extractor", "reporter", "indexer"], "threads"),
    ("merge", ["merger"], "prefork"),
    ("cluster", ["clusterer"], "prefork"),
    ("query", ["query", "reducer"], "threads"),
    ("map", ["map_analyst"], "threads"),
]


# Tasks that never call an LLM and only touch Redis get a short limit; everything else gets the
# configured default (``workers.task_soft_time_limit_s`` / ``task_time_limit_s``).
SHORT_TASKS = {CHUNK, PLAN_MERGE, PLAN_REPORTS, FINALIZE, DELETE_DOCUMENT, QUERY_DEADLINE}
SHORT_LIMITS_S = (300, 360)
# kombu looks for messages unacked past the visibility timeout every RESTORE_INTERVAL_S (a ZRANGE under a
# mutex), not every tenth look as by default: a killed worker's messages come back within
# ``visibility_timeout_s + RESTORE_INTERVAL_S``
RESTORE_INTERVAL_S = 10


def time_limits(settings) -> dict[str, tuple[int, int]]:
    """Task name -> (soft, hard) time limit in seconds; every soft limit below its hard one.

    Not capped by the visibility timeout: a live worker renews the lease of every message it holds
    (``workers/lease.py``), so a task running longer than the visibility timeout is not redelivered."""
    w = settings.workers

    def fit(soft: int, hard: int) -> tuple[int, int]:
        hard = max(2, hard)
        return max(1, min(soft, hard - max(1, hard // 10))), hard

    default = fit(w.task_soft_time_limit_s, w.task_time_limit_s)
    short = fit(min(SHORT_LIMITS_S[0], default[0]), min(SHORT_LIMITS_S[1], default[1]))
    return {name: short if name in SHORT_TASKS else default for name in ROUTES}


def lease_renew_interval(settings) -> float:
    """How often a worker renews its messages' leases: the setting, at most a quarter of the visibility
    timeout, so three renewals in a row may fail (a GIL-bound moment, a Redis blip) before a redelivery."""
    w = settings.workers
    return max(0.1, min(float(w.lease_renew_interval_s), w.visibility_timeout_s / 4))


def celery_config(settings) -> dict:
    """Delivery guarantees (docs/reliability.md): acks late, requeue on a lost worker, one message
    prefetched per worker slot, per-task soft/hard limits, a short visibility timeout with lease renewal,
    and a soft shutdown that requeues unfinished tasks at once."""
    w = settings.workers
    limits = time_limits(settings)
    config = {
        "broker_url": settings.redis_url,
        "task_ignore_result": True,
        "result_backend": None,
        "task_serializer": "json",
        "accept_content": ["json"],
        "task_acks_late": True,
        "task_reject_on_worker_lost": True,
        "task_acks_on_failure_or_timeout": True,
        "worker_prefetch_multiplier": 1,
        "task_default_queue": "default",
        "task_queues": [Queue(q) for q in [*QUEUES, "default"]],
        "task_routes": {name: {"queue": queue} for name, queue in ROUTES.items()},
        "broker_transport_options": {"visibility_timeout": w.visibility_timeout_s,
                                     "unacked_restore_interval": RESTORE_INTERVAL_S,
                                     "unacked_restore_throttle": 1},
        "broker_connection_retry_on_startup": True,
        "task_soft_time_limit": limits[EXTRACT][0],
        "task_time_limit": limits[EXTRACT][1],
        "task_annotations": {name: {"soft_time_limit": soft, "time_limit": hard}
                             for name, (soft, hard) in limits.items()},
        "worker_cancel_long_running_tasks_on_connection_loss": True,
        "worker_soft_shutdown_timeout": float(w.soft_shutdown_timeout_s),
        "worker_hijack_root_logger": False,
        "worker_send_task_events": False,
    }
    if is_tls(settings.redis_url):  # rediss://: kombu needs the SSL options spelled out (gateway and workers)
        config["broker_use_ssl"] = tls_options(settings)
    return config


def make_celery(settings, name: str = "graphfleet") -> Celery:
    app = Celery(name, set_as_current=False)
    app.conf.update(celery_config(settings))
    return app


# ---- redelivery cap
DELIVERY_TTL_S = 7 * 24 * 3600


def count_delivery(redis, tenant: str, job_id: str, stage: str, item: str) -> int:
    """Count one more delivery of (job, stage, item) and return the count (1 on the first run).

    A message comes back after its worker died (SIGKILL, OOM, hard time limit in a lost child), so a
    poison item would loop forever; callers give up once the count passes
    ``1 + workers.max_redeliveries`` (see :func:`delivery_exhausted`).
    """
    key = Keys(tenant).deliveries(job_id)
    pipe = redis.pipeline()
    pipe.hincrby(key, f"{stage}:{item}", 1)
    pipe.expire(key, DELIVERY_TTL_S)
    return int(pipe.execute()[0])


def delivery_exhausted(count: int, settings) -> bool:
    return count > 1 + settings.workers.max_redeliveries
