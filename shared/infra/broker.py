"""What the workers keep beside Celery's own messages: the leases of the messages they hold, in the broker's
Redis (``workers/lease.py``; a Redis or Sentinel broker only, RabbitMQ redelivers by itself; a dead worker's
messages put back by :func:`restore_older` once their lease, renewed by every live worker, has aged out), and their
consumer heartbeats, in the *state* Redis whatever the broker (``workers/heartbeat.py``, read by the gateway's
``graphfleet_queue_consumers`` gauge, ``shared/infra/metrics_collectors.py``). Reading the broker (depths,
in-flight messages, consumers) is ``shared/infra/broker_probe.py``."""

from __future__ import annotations

import time

from shared.infra.keys import BROKER_UNACKED_INDEX, consumers_key

# A worker counts as a consumer of a queue while its last heartbeat (every ``workers.heartbeat_interval_s``,
# 10 s by default) is at most CONSUMER_WINDOW_S old; entries older than CONSUMER_RETAIN_S are dropped.
CONSUMER_WINDOW_S = 30.0
CONSUMER_RETAIN_S = 3600.0


def renew_leases(redis, tags: list[str], now: float | None = None) -> int:
    """Move the delivery time of ``tags`` in kombu's ``unacked_index`` to ``now`` (``ZADD XX``: a tag acked
    meanwhile is not brought back); returns how many were still unacked."""
    if not tags:
        return 0
    stamp = time.time() if now is None else now
    return int(redis.zadd(BROKER_UNACKED_INDEX, dict.fromkeys(tags, stamp), xx=True, ch=True) or 0)


def reclaim_unrenewed(connection, before: float) -> int:
    """Put back on their queues the messages unacked in kombu's Redis transport whose lease was last set
    before ``before``; returns how many.

    For a supervisor that saw a worker die at ``before``: every live worker sets the lease of each message it
    holds to now every ``lease_renew_interval`` (``workers/lease.py``), so once two intervals have passed
    since the death, a lease still older than it belongs to no live worker (or to one whose renewals failed
    twice in a row: its task then runs twice, as after any redelivery; every task is idempotent). The
    visibility timeout would bring them back too, later (~``visibility_timeout_s`` after the death).
    ``connection`` is a kombu connection to the broker (``Celery.connection_for_write()``)."""
    return restore_older(connection.default_channel, before)


def restore_older(channel, before: float, keep: frozenset[str] = frozenset()) -> int:
    """Put back on their queues the unacked messages of ``channel``'s broker whose lease is older than
    ``before``, except the delivery tags in ``keep`` (the caller's own); returns how many went back.

    Each message goes back through kombu's own ``QoS.restore_by_tag``: one transaction that watches the
    ``unacked`` hash, so a message acked or restored meanwhile (by another worker doing the same, or by
    ``restore_visible``) is not put back twice."""
    qos = channel.qos
    restored = 0
    with channel.conn_or_acquire() as client:
        tags = client.zrangebyscore(qos.unacked_index_key, "-inf", f"({before}")
        for raw in tags:
            tag = raw.decode() if isinstance(raw, bytes) else str(raw)
            if tag in keep:
                continue
            if client.hexists(qos.unacked_key, tag):
                restored += 1
            qos.restore_by_tag(tag, client)
    return restored


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

