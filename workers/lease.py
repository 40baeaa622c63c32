"""Lease renewal: a live worker keeps the messages it holds from being redelivered.

kombu's Redis transport keeps every delivered, unacked message in the ``unacked`` hash and its delivery
time in the ``unacked_index`` sorted set; any consumer puts a message back on its queue once that time
is older than the visibility timeout (``QoS.restore_visible``). That is how the deliveries of a killed
worker come back, so the visibility timeout is the time a SIGKILL costs.

A daemon thread of every worker's main process (where kombu receives and acks messages, whatever the
pool) sets the score of each delivery tag its channel holds (``QoS._delivered``: running, reserved and
countdown tasks) to now, every ``workers.lease_renew_interval_s``. A task that runs longer than the
visibility timeout is therefore not redelivered while its worker lives, and the visibility timeout can
be short (``workers.visibility_timeout_s``, 120 s): when the worker dies its leases stop and its messages
come back within the visibility timeout plus kombu's restore interval. ``ZADD XX`` only updates tags
still in the index, so a tag acked meanwhile is not brought back. The renewals are also what lets
``graphfleet up``'s supervisor put a dead worker's messages back sooner: two intervals after the exit, a
lease older than the exit is held by no live worker (``shared.infra.broker.reclaim_unrenewed``).

The ``ZADD`` goes through the task channel's own connection pool (``Channel.conn_or_acquire``): the broker's
Redis, not the state's, and through Sentinel the *current* primary (kombu's sentinel-managed pool). On
RabbitMQ there is nothing to renew (no visibility timeout: the broker redelivers the messages of a closed
connection), so no thread is started.
"""

from __future__ import annotations

import logging
import threading

from celery.signals import worker_ready, worker_shutdown

from shared.infra.broker import renew_leases
from shared.infra.queueing import broker_url, is_amqp, lease_renew_interval
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


def _loop(consumer) -> None:
    interval = lease_renew_interval(runtime().settings)
    while not _stop.wait(interval):
        try:
            renew_held(consumer)
        except Exception:  # noqa: BLE001 - Redis down or restarting: try again at the next interval
            log.warning("could not renew the leases of this worker's messages; retrying in %.1f s", interval,
                        exc_info=True)


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
