"""Lease renewal, and the return of a dead worker's messages.

kombu's Redis transport keeps every delivered, unacked message in the ``unacked`` hash and its delivery
time in the ``unacked_index`` sorted set; any consumer puts a message back on its queue once that time
is older than the visibility timeout (``QoS.restore_visible``).

A daemon thread of every worker's main process (where kombu receives and acks messages, whatever the
pool) sets the score of each delivery tag its channel holds (``QoS._delivered``: running, reserved and
countdown tasks) to now, several times per ``workers.lease_renew_interval_s``: that score is the worker's
heartbeat for each message it holds. A task that runs longer than the visibility timeout is therefore not
redelivered while its worker lives. ``ZADD XX`` only updates tags still in the index, so a tag acked
meanwhile is not brought back.

The same thread, each time, puts back the messages whose lease has aged past ``lease_expiry`` (two renewal
intervals and a margin, 32 s by default): no live process renewed them, so their worker is gone
(SIGKILL, OOM, a lost host), whoever restarted it or not (``graphfleet up``'s supervisor, Compose,
Kubernetes, nobody). A restarted worker holds none of them: its channel's delivery tags are new. Any live
worker does it (kombu's transaction per message puts each back once); its own tags are skipped. The
visibility timeout stays as the last resort (no worker of the fleet alive to look).

The Redis calls go through the task channel's own connection pool (``Channel.conn_or_acquire``): the broker's
Redis, not the state's, and through Sentinel the *current* primary (kombu's sentinel-managed pool). On
RabbitMQ there is nothing to renew (no visibility timeout: the broker redelivers the messages of a closed
connection at once), so no thread is started.
"""

from __future__ import annotations

import logging
import threading
import time

from celery.signals import worker_ready, worker_shutdown

from shared.infra.broker import renew_leases, restore_older
from shared.infra.queueing import LEASE_CHECKS_PER_INTERVAL, broker_url, is_amqp, lease_expiry, lease_renew_interval
from workers.runtime import runtime

log = logging.getLogger(__name__)
_stop = threading.Event()


def held_tags(consumer) -> list[str]:
    """Delivery tags this worker holds (delivered, not acked) on its task channel."""
    try:
        qos = consumer.task_consumer.channel.qos
        return [str(tag) for tag in list(qos._delivered)]
    except (AttributeError, RuntimeError):  # no channel yet, or reconnecting
        return []


def renew_held(consumer) -> int:
    """Renew the leases of the messages this worker holds, on the broker its task channel talks to."""
    tags = held_tags(consumer)
    if not tags:
        return 0
    channel = consumer.task_consumer.channel
    with channel.conn_or_acquire() as client:
        return renew_leases(client, tags)


def reclaim_expired(consumer, expiry: float) -> int:
    """Put back the messages whose lease no live worker renewed for ``expiry`` seconds; returns how many."""
    try:
        channel = consumer.task_consumer.channel
    except AttributeError:  # no channel yet
        return 0
    return restore_older(channel, time.time() - expiry, keep=frozenset(held_tags(consumer)))


def tend(consumer, expiry: float) -> int:
    """One pass of the lease thread: renew this worker's leases, then put back the expired ones."""
    renew_held(consumer)
    count = reclaim_expired(consumer, expiry)
    if count:
        log.warning("put back %d message(s) whose worker stopped renewing their lease %.0f s ago", count, expiry)
    return count


def _loop(consumer) -> None:
    settings = runtime().settings
    every = lease_renew_interval(settings) / LEASE_CHECKS_PER_INTERVAL
    expiry = lease_expiry(settings)
    while not _stop.wait(every):
        try:
            tend(consumer, expiry)
        except Exception:  # noqa: BLE001 - Redis down or restarting: try again at the next pass
            log.warning("could not renew or check the message leases; retrying in %.1f s", every, exc_info=True)


def install(app) -> None:
    @worker_ready.connect(weak=False)
    def _start(sender=None, **_kwargs) -> None:
        _stop.clear()
        if is_amqp(broker_url(runtime().settings)):
            return  # RabbitMQ: redeliveries are the broker's job
        threading.Thread(target=_loop, args=(sender,), name="graphfleet-lease", daemon=True).start()

    @worker_shutdown.connect(weak=False)
    def _halt(**_kwargs) -> None:
        _stop.set()
