"""Consumer heartbeats: which worker consumes which queue, in the *state* Redis whatever the broker
(``workers/heartbeat.py`` writes them; the gateway's ``graphfleet_queue_consumers`` gauge,
``shared/infra/observability/metrics_collectors.py``, and the query wait read them). The leases of the messages the
workers hold are ``shared/infra/messaging/celery_patches/redis_leases.py``; reading the broker (depths, in-flight
messages, consumers) is ``shared/infra/messaging/broker_probe.py``."""

from __future__ import annotations

from shared.infra.redis.keys import consumers_key

# A worker counts as a consumer of a queue while its last heartbeat (every ``workers.heartbeat_interval_s``,
# 10 s by default) is at most CONSUMER_WINDOW_S old; entries older than CONSUMER_RETAIN_S are dropped.
CONSUMER_WINDOW_S = 30.0
CONSUMER_RETAIN_S = 3600.0


def record_consumer(redis, node: str, queues: list[str]) -> None:
    """Record ``node`` as a live consumer of ``queues`` now (Redis clock, so hosts' clocks do not matter)."""
    seconds, micros = redis.time()
    now = seconds + micros / 1e6
    pipe = redis.pipeline(transaction=False)
    for q in queues:
        key = consumers_key(q)
        pipe.zadd(key, {node: now})
        pipe.zremrangebyscore(key, "-inf", now - CONSUMER_RETAIN_S)  # workers gone long ago
        pipe.expire(key, int(CONSUMER_RETAIN_S))
    pipe.execute()


def retire_consumer(redis, node: str, queues: list[str]) -> None:
    pipe = redis.pipeline(transaction=False)
    for q in queues:
        pipe.zrem(consumers_key(q), node)
    pipe.execute()

