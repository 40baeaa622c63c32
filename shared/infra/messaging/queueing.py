"""Task names, queues and the Celery configuration shared by workers and enqueuers.

The gateway and the CLI enqueue by task *name* through :func:`make_celery`; they never import
``workers``.
"""

from __future__ import annotations

from urllib.parse import urlparse

from celery import Celery
from kombu import Exchange, Queue

from shared.infra.redis.conn import is_cluster, is_tls, tls_options

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


LEASE_CHECKS_PER_INTERVAL = 3  # a worker renews its leases and looks for expired ones 3 times per interval
LEASE_EXPIRY_MARGIN_S = 2.0


def lease_expiry(settings) -> float:
    """How old a lease may get before its message is put back (``workers/lease.py``): two renewal intervals
    and a margin. A live worker renews its leases several times per interval, so only a lease whose worker is
    gone (or has failed every renewal for that long) gets this old; far below the visibility timeout."""
    return 2 * lease_renew_interval(settings) + LEASE_EXPIRY_MARGIN_S


def celery_config(settings) -> dict:
    """Delivery guarantees (docs/reliability.md): acks late, requeue on a lost worker, one message
    prefetched per worker slot, per-task soft/hard limits, a short visibility timeout with lease renewal,
    and a soft shutdown that requeues unfinished tasks at once."""
    w = settings.workers
    limits = time_limits(settings)
    config = {
        "broker_url": broker_url(settings),
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
        "broker_transport_options": celery_config_transport(settings),
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
    if is_tls(broker_url(settings)):  # rediss://: kombu needs the SSL options spelled out (gateway and workers)
        config["broker_use_ssl"] = tls_options(settings)
    config.update(broker_options(settings, broker_url(settings)))
    return config


AMQP_SCHEMES = ("amqp", "amqps", "pyamqp")


def is_amqp(url: str | None) -> bool:
    """A RabbitMQ broker URL (``amqp://``, ``amqps://``, ``pyamqp://``)."""
    return urlparse(url or "").scheme in AMQP_SCHEMES


def is_sentinel(url: str | None) -> bool:
    """A Redis Sentinel broker URL (``sentinel://h:p;sentinel://h2:p2``)."""
    return urlparse(url or "").scheme == "sentinel"


def broker_options(settings, url: str | None) -> dict:
    """What differs per broker. Redis: the defaults above (visibility timeout, lease renewal by the workers).
    Sentinel (``sentinel://h:p;sentinel://h2:p2``): the same, plus the master name kombu asks the sentinels for.
    RabbitMQ (``amqp://``): durable quorum queues (replicated; Celery 5.5+ detects them and drops the global
    QoS they do not support), publisher confirms, no visibility timeout: the broker redelivers the unacked
    messages of a closed connection at once."""
    if is_sentinel(url):
        options = dict(celery_config_transport(settings), master_name=settings.broker_sentinel_master)
        return {"broker_transport_options": options}
    if is_amqp(url):
        return {"task_queues": [quorum_queue(q) for q in [*QUEUES, "default"]],
                "task_default_queue_type": "quorum", "task_create_missing_queue_type": "quorum",
                "worker_detect_quorum_queues": True, "broker_transport_options": {"confirm_publish": True}}
    return {}


def quorum_queue(name: str) -> Queue:
    """A durable quorum queue behind a topic exchange of its own (routing key = its name): a countdown message
    (``QueryDeadline``) then goes through Celery's native delayed delivery (RabbitMQ's delay exchanges) instead
    of being held by a worker, which quorum queues make costly (no global QoS to raise the prefetch)."""
    return Queue(name, Exchange(name, type="topic", durable=True), routing_key=name, durable=True,
                 queue_arguments={"x-queue-type": "quorum"})


def celery_config_transport(settings) -> dict:
    """kombu's Redis transport options (plain Redis and Sentinel)."""
    return {"visibility_timeout": settings.workers.visibility_timeout_s,
            "unacked_restore_interval": RESTORE_INTERVAL_S, "unacked_restore_throttle": 1}


def broker_url(settings) -> str | None:
    """Celery's broker: ``GRAPHFLEET_BROKER_URL``, else the one Redis of ``GRAPHFLEET_REDIS_URL``. A Redis
    Cluster holds state only (kombu has no cluster transport): it needs a broker of its own."""
    url = settings.broker_url or settings.redis_url
    if is_cluster(url):
        raise ValueError("a Redis Cluster (redis+cluster://) cannot be Celery's broker: set GRAPHFLEET_BROKER_URL "
                         "to a Redis, a Sentinel group (sentinel://) or RabbitMQ (amqp://)")
    return url


def settings_for(settings, state_url: str | None, broker: str | None = None):
    """``settings`` pointed at the state Redis ``state_url``. Its broker is ``broker`` when given, else the
    configured ``GRAPHFLEET_BROKER_URL`` when ``state_url`` is the configured state or a Redis Cluster (which
    cannot be a broker), else ``state_url`` itself: a Redis named on its own is its own broker."""
    if broker is None and (state_url == settings.redis_url or is_cluster(state_url)):
        broker = settings.broker_url
    return settings.model_copy(update={"redis_url": state_url, "broker_url": broker or None})


def make_celery(settings, name: str = "graphfleet") -> Celery:
    from shared.infra.messaging import celery_patches

    celery_patches.install(worker=False)  # a sender's patches (messaging/celery_patches/), once per process
    app = Celery(name, set_as_current=False)
    app.conf.update(celery_config(settings))
    return app


# ---- redelivery cap (each delivery is counted by ``JobStore.admit``, with the job's guard, in one round trip)
def delivery_exhausted(count: int, settings) -> bool:
    """Whether a (job, task, item) delivered ``count`` times is poison: past ``1 + workers.max_redeliveries``."""
    return count > max_deliveries(settings)


def max_deliveries(settings) -> int:
    return 1 + settings.workers.max_redeliveries
