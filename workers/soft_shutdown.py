"""SIGTERM on a ``threads`` (or ``solo``) worker: a bounded wait, then the unfinished tasks are requeued.

The deployment sets ``REMAP_SIGTERM=SIGQUIT`` (docker-compose.yml, ``graphfleet up``), so SIGTERM is
Celery's cold shutdown preceded by its soft shutdown: running tasks get ``worker_soft_shutdown_timeout``
(``workers.soft_shutdown_timeout_s``, 30 s) to finish, then Celery cancels them and the broker connection's
close requeues their messages (kombu's ``restore_at_shutdown``). That works on ``prefork`` (the pool kills
its children). A pool that cannot stop a task (``threads``, ``solo``: ``terminate_job`` not implemented)
fails the cancel with ``NotImplementedError`` and then joins its threads for as long as the tasks run: the
container is SIGKILLed at the end of its grace period and the messages wait for the visibility timeout.

So after the soft shutdown wait, on such a pool, this module puts every message the worker still holds
back at the head of its queue (``QoS.restore_unacked``: the messages come out of the ``unacked`` hash) and
exits the process at once; another worker runs them now. A task that finishes in the instant between the
requeue and the exit runs again: every task is idempotent.

``restore_unacked`` runs on the task channel's own connection pool: the broker's Redis, through Sentinel the
current primary. On RabbitMQ the channel has no such QoS; the exit closes the connection and the broker
requeues every unacked message at once, which is the same outcome.
"""

from __future__ import annotations

import logging
import os
import sys

from celery.concurrency.base import BasePool
from celery.worker import state
from celery.worker.worker import WorkController

log = logging.getLogger(__name__)
_original = WorkController.wait_for_soft_shutdown
EXIT_CODE = 0  # a deliberate stop: compose's `restart: unless-stopped` and the embedded stack restart it anyway


def cannot_stop_tasks(pool) -> bool:
    return type(pool).terminate_job is BasePool.terminate_job


def requeue_held(consumer) -> int:
    """Put the messages this worker holds back on their queues; returns how many."""
    qos = getattr(consumer.task_consumer.channel, "qos", None)
    if not hasattr(qos, "restore_unacked"):
        return 0  # RabbitMQ: closing the connection (the exit) requeues them
    held = len(qos._delivered)
    qos.restore_unacked()
    return held


def _wait_then_requeue(self: WorkController) -> None:
    _original(self)  # the soft shutdown: up to worker_soft_shutdown_timeout while tasks run
    if not state.active_requests or not cannot_stop_tasks(self.pool):
        return  # nothing running, or a pool that cancels its tasks itself (prefork)
    try:
        count = requeue_held(self.consumer)
        log.warning("soft shutdown over with %d task(s) still running on a %s pool that cannot stop them: "
                    "requeued %d message(s) and exiting", len(state.active_requests), type(self.pool).__module__,
                    count)
    except Exception:  # noqa: BLE001 - the messages stay unacked and come back after the visibility timeout
        log.exception("could not requeue the running tasks' messages; exiting anyway")
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    os._exit(EXIT_CODE)


def install() -> None:
    WorkController.wait_for_soft_shutdown = _wait_then_requeue
