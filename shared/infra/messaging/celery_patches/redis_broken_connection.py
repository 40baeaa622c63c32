"""A Redis restart (or a Sentinel failover) mid-task must not stop the worker's consumer.

Upstream behaviour: when the broker connection breaks while messages are delivered but not yet acked, Celery
closes the connection; kombu's Redis transport then puts those messages back (``QoS.restore_unacked`` on close,
or a deferred ``reject(requeue=True)``) through a channel whose connection is already gone, and
``Channel._connparams`` fails with ``AttributeError: 'NoneType' object has no attribute 'hostname'`` (or
``'client'``), the failure of celery/kombu#582 and kombu#970. That is not one of the connection errors Celery
handles, so it logs "Unrecoverable error": the worker stops consuming while its process stays alive (as in
celery/celery#10205), no supervisor restarts it, and the job waits in ``running`` forever.

The messages are safe without that restore: kombu keeps every delivered message in the ``unacked`` hash in Redis
(persisted with the AOF) until it is acked, and a consumer redelivers it once it is older than the visibility
timeout (or its lease expired, :mod:`.redis_leases`). So a closed channel raises a Redis ``ConnectionError``
(which kombu and Celery handle as a lost connection: the consumer reconnects) and a failed restore on close is
logged and skipped. ``SentinelChannel`` subclasses ``Channel`` and uses this ``QoS``: a failover is covered, and
the reconnecting consumer reaches the new primary through the sentinels. RabbitMQ does not use these classes.

Applies to: kombu 5.7 (``APPLIES_TO``). Delete when ``tests/reliability/test_faults.py::
test_redis_restart_mid_job_resumes_from_the_append_only_file`` passes on a kombu without this patch (kombu then
raises a connection error, or skips the restore, on a closed channel).
"""

from __future__ import annotations

import logging

from kombu.transport import redis as kombu_redis
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisError

from shared.infra.messaging.celery_patches.patching import replace

APPLIES_TO = {"kombu": ">=5.7,<5.8"}
PATCHES = ("kombu.transport.redis:QoS.restore_unacked", "kombu.transport.redis:Channel._connparams")
log = logging.getLogger(__name__)


def _connparams_or_connection_error(original):
    def _connparams(self, asynchronous=False):
        if self.connection is None or self.connection.client is None:
            raise RedisConnectionError("the broker connection of this channel is closed")
        return original(self, asynchronous=asynchronous)

    return _connparams


def _restore_unacked_or_leave_for_redelivery(original):
    def restore_unacked(self, client=None):
        try:
            return original(self, client)
        except (AttributeError, OSError, RedisError) as exc:
            log.warning("could not requeue %d unacked message(s) on a broken connection (%r); they stay in the "
                        "unacked hash and are redelivered after the visibility timeout", len(self._delivered), exc)
            self._delivered.clear()
            return None

    return restore_unacked


def install() -> None:
    replace(kombu_redis.QoS, "restore_unacked", _restore_unacked_or_leave_for_redelivery)
    replace(kombu_redis.Channel, "_connparams", _connparams_or_connection_error)
