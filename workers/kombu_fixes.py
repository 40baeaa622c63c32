"""Workarounds for kombu's Redis transport losing the consumer when Redis restarts mid-task.

When the broker connection breaks while messages are delivered but not yet acked, Celery closes the
connection; kombu then tries to put those messages back on their queues (``QoS.restore_unacked`` on
close, or a deferred ``reject(requeue=True)``) through a channel whose connection is already gone, and
``Channel._connparams`` fails with ``AttributeError: 'NoneType' object has no attribute 'hostname'`` (or
``'client'``) (kombu 5.7). That is not one of the connection errors Celery handles, so it logs
"Unrecoverable error": the worker stops consuming but its process stays alive, no supervisor restarts
it, and the job waits in ``running`` forever.

The messages are safe without that restore: kombu keeps every delivered message in the ``unacked``
hash in Redis (persisted with the AOF) until it is acked, and a consumer redelivers it once it is older
than the visibility timeout. So a closed channel raises a Redis ``ConnectionError`` (which kombu and
Celery handle as a lost connection) and a failed restore on close is logged and skipped; the consumer
reconnects. Found by tests/reliability/test_faults.py::test_redis_restart_mid_job_resumes_from_the_append_only_file.

The same classes serve kombu's Sentinel transport (``SentinelChannel`` subclasses ``Channel`` and uses this
``QoS``), where a failover breaks the connection the same way: the patches cover it, and the reconnecting
consumer reaches the new primary through the sentinels. On RabbitMQ (``amqp://``) these classes are not used
and the patches are inert: there a broken connection makes the broker requeue every unacked message itself.

On RabbitMQ one Celery gap is closed instead: at start a worker binds *every* configured queue to the native
delayed delivery exchanges (countdown messages on quorum queues, ``shared.infra.queueing.quorum_queue``) but
declares only the queues it consumes, so the binding of the others fails ("Failed to bind queue ...", logged
as critical) until their own worker runs. :func:`declare_queues` declares them all first, on ``worker_init``.
"""

from __future__ import annotations

import logging

from celery.signals import worker_init
from kombu.transport import redis as kombu_redis
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisError

from shared.infra.queueing import is_amqp

log = logging.getLogger(__name__)
_original = kombu_redis.QoS.restore_unacked
_original_connparams = kombu_redis.Channel._connparams


def _connparams_or_connection_error(self, asynchronous=False):
    if self.connection is None or self.connection.client is None:
        raise RedisConnectionError("the broker connection of this channel is closed")
    return _original_connparams(self, asynchronous=asynchronous)


def _restore_unacked_or_leave_for_redelivery(self, client=None):
    try:
        return _original(self, client)
    except (AttributeError, OSError, RedisError) as exc:
        log.warning("could not requeue %d unacked message(s) on a broken connection (%r); they stay in the "
                    "unacked hash and are redelivered after the visibility timeout", len(self._delivered), exc)
        self._delivered.clear()
        return None


def declare_queues(sender=None, **_kwargs) -> None:
    """RabbitMQ only: declare every configured queue (and its exchange) before the consumer starts."""
    app = getattr(sender, "app", None)
    if app is None or not is_amqp(app.conf.broker_url):
        return
    try:
        with app.connection_for_write() as conn:
            conn.ensure_connection(max_retries=3)
            channel = conn.default_channel
            for queue in app.conf.task_queues or []:
                queue(channel).declare()
    except Exception:  # noqa: BLE001 - the broker is not up yet: the consumer's own retries take over
        log.warning("could not declare the queues before starting", exc_info=True)


def install() -> None:
    kombu_redis.QoS.restore_unacked = _restore_unacked_or_leave_for_redelivery
    kombu_redis.Channel._connparams = _connparams_or_connection_error
    worker_init.connect(declare_queues, weak=False)
