"""Leases on the messages a worker holds, kept in kombu's own Redis bookkeeping; a dead worker's messages put back.

Upstream behaviour: kombu's Redis transport keeps every delivered, unacked message in the ``unacked`` hash and its
delivery time in the ``unacked_index`` sorted set, and any consumer puts a message back on its queue once that time is
older than the visibility timeout (``QoS.restore_visible``), whether or not the worker that holds it still runs it:
a task longer than the timeout runs twice (celery/celery#5935), and a dead worker's messages wait the whole timeout.

So every live worker sets the delivery time of each message it holds (``QoS._delivered``: running, reserved and
countdown tasks) to now, several times per ``workers.lease_renew_interval_s`` (``workers/lease.py`` runs
:func:`tend`): that score is the worker's lease on the message (``ZADD XX``: a tag acked meanwhile is not brought
back). A lease older than ``shared.infra.messaging.queueing.lease_expiry`` was renewed by no live process: its worker is
gone (SIGKILL, OOM, a lost host), and any live worker puts it back (:func:`restore_older`); its own tags are skipped.
``graphfleet up``'s supervisor does the same once per worker exit it saw (:func:`reclaim_unrenewed`). Each put-back
is one transaction that watches both the ``unacked`` hash and the lease index and rereads the lease first: kombu's
``QoS.restore_by_tag`` watches only the hash, so a worker acting on a list of expired tags read a moment earlier
would put back a message that another worker had already put back and a third had taken again (a redelivery keeps
its delivery tag), and the task would run twice at once. The visibility timeout stays as the last resort.

The Redis calls go through the task channel's own client (``Channel.conn_or_acquire``): the broker's Redis, not the
state's, and through Sentinel the *current* primary. RabbitMQ redelivers a closed connection's messages at once and
has no visibility timeout: nothing here runs there.

Applies to: kombu 5.7 (``APPLIES_TO``; the key names are ``shared.infra.redis.keys.BROKER_UNACKED*``). Delete when kombu
renews (or lets a consumer renew) the visibility of the messages a live consumer holds, or when the Redis broker is
dropped.
"""

from __future__ import annotations

import logging
import time

from kombu.utils.json import loads

from shared.infra.redis.keys import BROKER_UNACKED_INDEX

APPLIES_TO = {"kombu": ">=5.7,<5.8"}
log = logging.getLogger(__name__)


def held_tags(consumer) -> list[str]:
    """Delivery tags this worker holds (delivered, not acked) on its task channel."""
    try:
        qos = consumer.task_consumer.channel.qos
        return [str(tag) for tag in list(qos._delivered)]
    except (AttributeError, RuntimeError):  # no channel yet, or reconnecting
        return []


def renew_leases(redis, tags: list[str], now: float | None = None) -> int:
    """Move the delivery time of ``tags`` in kombu's ``unacked_index`` to ``now`` (``ZADD XX``: a tag acked
    meanwhile is not brought back); returns how many were still unacked."""
    if not tags:
        return 0
    stamp = time.time() if now is None else now
    return int(redis.zadd(BROKER_UNACKED_INDEX, dict.fromkeys(tags, stamp), xx=True, ch=True) or 0)


def renew_held(consumer) -> int:
    """Renew the leases of the messages this worker holds, on the broker its task channel talks to."""
    tags = held_tags(consumer)
    if not tags:
        return 0
    channel = consumer.task_consumer.channel
    with channel.conn_or_acquire() as client:
        return renew_leases(client, tags)


def restore_if_older(channel, tag: str, before: float, client) -> bool:
    """Put the unacked message ``tag`` back on its queue if its lease is still older than ``before``; says whether it
    went back. The lease is reread inside the transaction: a message acked, put back, or taken again and renewed since
    the caller listed it stays where it is."""
    qos = channel.qos

    def put_back(pipe) -> bool:
        lease = pipe.zscore(qos.unacked_index_key, tag)
        payload = pipe.hget(qos.unacked_key, tag)
        pipe.multi()
        if lease is None or lease >= before or payload is None:
            return False
        qos._remove_from_indices(tag, pipe)
        message, exchange, routing_key = loads(payload)  # kombu's own json, as restore_by_tag reads it
        channel._do_restore_message(message, exchange, routing_key, pipe)
        return True

    return client.transaction(put_back, qos.unacked_key, qos.unacked_index_key, value_from_callable=True)


def restore_older(channel, before: float, keep: frozenset[str] = frozenset()) -> int:
    """Put back on their queues the unacked messages of ``channel``'s broker whose lease is older than
    ``before``, except the delivery tags in ``keep`` (the caller's own); returns how many went back."""
    restored = 0
    with channel.conn_or_acquire() as client:
        for raw in client.zrangebyscore(channel.qos.unacked_index_key, "-inf", f"({before}"):
            tag = raw.decode() if isinstance(raw, bytes) else str(raw)
            if tag not in keep:
                restored += restore_if_older(channel, tag, before, client)
    return restored


def reclaim_expired(consumer, expiry: float) -> int:
    """Put back the messages whose lease no live worker renewed for ``expiry`` seconds; returns how many."""
    try:
        channel = consumer.task_consumer.channel
    except AttributeError:  # no channel yet
        return 0
    return restore_older(channel, time.time() - expiry, keep=frozenset(held_tags(consumer)))


def tend(consumer, expiry: float) -> int:
    """One pass of a worker's lease thread: renew its leases, then put back the expired ones."""
    renew_held(consumer)
    count = reclaim_expired(consumer, expiry)
    if count:
        log.warning("put back %d message(s) whose worker stopped renewing their lease %.0f s ago", count, expiry)
    return count


def reclaim_unrenewed(connection, before: float) -> int:
    """Put back the unacked messages whose lease was last set before ``before``; returns how many.

    For a supervisor that saw a worker die at ``before``: once two renewal intervals have passed since the death, a
    lease still older than it belongs to no live worker (or to one whose renewals failed twice in a row: its task then
    runs twice, as after any redelivery; every task is idempotent). ``connection`` is a kombu connection to the broker
    (``Celery.connection_for_write()``)."""
    return restore_older(connection.default_channel, before)
