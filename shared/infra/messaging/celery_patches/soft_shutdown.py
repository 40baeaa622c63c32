"""SIGTERM: a soft shutdown that acks what finishes in it, then the unfinished tasks are requeued at once.

``REMAP_SIGTERM=SIGQUIT`` (docker-compose.yml, ``graphfleet up``) makes SIGTERM Celery's cold shutdown preceded
by its soft shutdown: running tasks get ``workers.soft_shutdown_timeout_s`` (30 s) to finish.

Upstream behaviour: ``WorkController.wait_for_soft_shutdown`` sleeps the whole timeout in the signal handler, even
once the tasks have finished (celery/celery#9505), while the event loop that would run their acks
(``call_soon_ack``) is blocked under it, so a task that finished in the wait kept its message unacked and ran again
elsewhere. :func:`soft_shutdown_wait` replaces it: it runs the acks and rejects scheduled and not run
(:func:`.shutdown_acks.flush_acks`) every ``POLL_S``, and ends once every running task finished and was acked (or at
the timeout). Tasks still queued for a free thread start no more (:mod:`.shutdown_pool`).

After the wait, on a pool that cannot stop a task (``threads``, ``solo``), Celery's cancel fails and joins the
running tasks, and its cold shutdown can hang well past the stop timeout even with none running. So then this module
reads the ``BRPOP`` answer in flight on Redis (:func:`.shutdown_inflight.read_in_flight`: a message the server popped
for this worker), puts every held message back at the head of its queue (``QoS.restore_unacked``; on RabbitMQ the
exit's closed connection does it), runs the ``worker_shutdown`` hooks and exits (:func:`_exit`). A task finishing
between the requeue and the exit runs again (tasks are idempotent). Prefork goes on with Celery's cold shutdown. On
every pool, a message delivered after the wait starts no task (:func:`start_nothing_more`). Reads kombu's private
``QoS._delivered`` and ``QoS._dirty`` (what the channel holds, and what of it is acked).

Applies to: celery 5.7, kombu 5.7 (``APPLIES_TO``). Delete (with :mod:`.shutdown_acks`, :mod:`.shutdown_pool`,
:mod:`.shutdown_inflight`, :mod:`.main_stack`) when Celery's soft shutdown ends once its tasks are done and acked, and
its cold shutdown requeues what a threads pool still runs: ``tests/reliability/test_shutdown.py`` passes without them.
"""

from __future__ import annotations

import logging
import os
import sys
import time

from celery import signals
from celery.concurrency.base import BasePool
from celery.worker import state
from celery.worker.worker import WorkController

from shared.infra.messaging.celery_patches import shutdown_acks, shutdown_pool
from shared.infra.messaging.celery_patches.main_stack import interrupted_at
from shared.infra.messaging.celery_patches.patching import replace
from shared.infra.messaging.celery_patches.shutdown_acks import flush_acks
from shared.infra.messaging.celery_patches.shutdown_inflight import read_in_flight

APPLIES_TO = {"celery": ">=5.7,<5.8", "kombu": ">=5.7,<5.8"}
PATCHES = ("celery.worker.worker:WorkController.wait_for_soft_shutdown",)
log = logging.getLogger(__name__)
EXIT_CODE = 0  # a deliberate stop: compose's `restart: unless-stopped` and the embedded stack restart it anyway
POLL_S = 0.05


def cannot_stop_tasks(pool) -> bool:  # threads, solo; prefork sets its own terminate_job when it starts
    return getattr(pool.terminate_job, "__func__", None) is BasePool.terminate_job


def soft_shutdown_wait(worker: WorkController) -> None:
    """Celery's soft shutdown wait, with the acks run meanwhile; ends once what ran finished and was acked."""
    conf = worker.app.conf
    if cancelled := shutdown_pool.cancel_queued(worker.pool):
        log.warning("soft shutdown: %d task(s) waiting for a free thread will not start here", cancelled)
    timeout, on_idle = float(conf.worker_soft_shutdown_timeout or 0), bool(conf.worker_enable_soft_shutdown_on_idle)
    exiting = cannot_stop_tasks(worker.pool)  # then the handler exits: the code it interrupted never goes on
    settled, flushed = False, 0
    if timeout > 0 and (state.active_requests or shutdown_pool.pool_busy() or on_idle):
        log.warning("Initiating Soft Shutdown, terminating in %s seconds (the signal came in %s)", timeout,
                    interrupted_at())
        deadline, seen = time.monotonic() + timeout, set()
        while True:
            seen.update(state.active_requests)
            flushed += flush_acks(exiting)
            # a finished request leaves active_requests, then schedules its ack, then is marked acknowledged
            settled = (not state.active_requests and not shutdown_pool.pool_busy()
                       and all(r.acknowledged for r in seen))
            if (settled and not on_idle) or time.monotonic() >= deadline:
                break
            time.sleep(POLL_S)
    flushed += flush_acks(exiting)
    if settled:  # the wait ran and ended with every task finished and acked
        log.warning("soft shutdown: every running task finished and was acked (%d ack(s) run by the wait)", flushed)


def client_holds_unacked(consumer) -> bool:
    """Redis: the unacked messages are this client's to put back (RabbitMQ requeues them on the closed socket).
    False for a consumer that never connected (a SIGTERM while starting): it holds nothing."""
    channel = getattr(getattr(consumer, "task_consumer", None), "channel", None)
    return hasattr(getattr(channel, "qos", None), "restore_unacked")


def requeue_held(consumer) -> int:
    """Put the messages this worker holds back on their queues; returns how many were still unacked."""
    if not client_holds_unacked(consumer):
        return 0
    qos = consumer.task_consumer.channel.qos
    held = len([tag for tag in list(qos._delivered) if tag not in qos._dirty])  # _dirty: acked, not yet dropped
    qos.restore_unacked()
    return held


def start_nothing_more(consumer) -> None:
    """From here on, a task message the consumer still receives is left unacked and not started: Celery's cold
    shutdown still delivers after the wait (RabbitMQ's ``basic_cancel``; on Redis a ``BRPOP`` answer in flight),
    and a task started then could not be stopped on a threads pool. It goes back to its queue (the closed
    connection, the channel's close or :func:`requeue_held`; else the visibility timeout)."""
    task_consumer = getattr(consumer, "task_consumer", None)
    if task_consumer is not None:
        task_consumer.on_message = _leave_for_another_worker


def _leave_for_another_worker(message) -> None:
    log.warning("soft shutdown: a message delivered after the wait (%s) is left for another worker",
                (message.headers or {}).get("task", "?"))


def _wait_then_requeue(self: WorkController) -> None:
    soft_shutdown_wait(self)
    start_nothing_more(self.consumer)
    if not cannot_stop_tasks(self.pool):
        return  # prefork cancels its tasks
    _exit(self)


def _exit(self: WorkController) -> None:
    try:
        read_in_flight(self.consumer)  # Redis: a message popped for this worker is held, then requeued, not lost
        log.warning("soft shutdown over: %d task(s) still running on a %s pool that cannot stop them: requeued %d "
                    "message(s) and exiting", len(state.active_requests), type(self.pool).__module__,
                    requeue_held(self.consumer))
    except Exception:  # noqa: BLE001 - the messages stay unacked and come back after the visibility timeout
        log.exception("could not requeue the held messages; exiting anyway")
    try:
        signals.worker_shutdown.send(sender=self)  # heartbeat, lease, watchdog, warm-up and metrics hooks
    except Exception:  # noqa: BLE001 - a failed hook must not keep the process alive
        log.exception("a worker_shutdown hook failed; exiting anyway")
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    os._exit(EXIT_CODE)


def install() -> None:
    shutdown_acks.install()
    shutdown_pool.install()
    replace(WorkController, "wait_for_soft_shutdown", lambda _original: _wait_then_requeue)
