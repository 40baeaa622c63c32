"""The threads pool in a soft shutdown: the tasks still waiting for a free thread start no more, and the wait knows
a thread that is between taking a task and starting it.

Upstream behaviour: Celery hands every task message it receives to its pool at once; a threads pool (a
``ThreadPoolExecutor``) queues those beyond its threads. On RabbitMQ the worker's quorum queues have a prefetch per
queue consumer (no global one), so a worker consuming five queues with four threads holds up to twenty messages, and
some wait there. In the soft shutdown such a task starts when a running one ends; the wait, which sees only the tasks
that started (``state.active_requests``), can find none running in between, end, and the exit stops the task just
started: it runs again on the next worker.

:func:`cancel_queued` cancels the queued ones when the wait begins: their messages stay unacked and go back to their
queues with the rest. :func:`pool_busy` is true while any task handed to the pool has not ended, started or not.

Both run in the signal handler, on top of the main thread it interrupted, and that thread is the one that hands tasks
to the pool: a lock it held there would never be released. So they take none. The tracked set is changed by single
set operations (atomic under the GIL), and the queued tasks are taken from the executor's ``SimpleQueue``
(``_work_queue``), which is safe to use from a signal handler, rather than by ``ThreadPoolExecutor.shutdown``, whose
lock ``submit`` holds (a handler that took it could hang the worker past its stop timeout).

Applies to: celery 5.7, Python 3.11 (``APPLIES_TO``). Delete with :mod:`.soft_shutdown`.
"""

from __future__ import annotations

import queue
from concurrent.futures import Future, ThreadPoolExecutor

from celery.concurrency.thread import TaskPool

from shared.infra.messaging.celery_patches.patching import replace

APPLIES_TO = {"celery": ">=5.7,<5.8", "python": ">=3.11"}
PATCHES = ("celery.concurrency.thread:TaskPool.on_apply",)
_not_done: set[Future] = set()  # every task handed to a threads pool of this process that has not ended


def _track(future: Future) -> None:
    _not_done.add(future)
    future.add_done_callback(_not_done.discard)  # runs at once when the future is already done


def pool_busy() -> bool:
    """Whether a task handed to a threads pool has not ended: running, about to start, or queued."""
    return bool(_not_done)


def cancel_queued(pool) -> int:
    """Cancel the tasks waiting in a threads pool's queue; returns how many. The running ones go on. Nothing else is
    handed to this pool afterwards: after the wait the consumer starts no task (``start_nothing_more``)."""
    executor = getattr(pool, "executor", None)
    if not isinstance(executor, ThreadPoolExecutor):
        return 0  # solo runs its one task in the main thread; prefork has its own queue and cancel
    cancelled = 0
    while True:
        try:
            item = executor._work_queue.get_nowait()
        except queue.Empty:
            return cancelled
        if item is not None and item.future.cancel():  # a thread that takes a cancelled item skips it
            cancelled += 1


def install() -> None:
    """Track every task a threads pool is handed (Celery's ``TaskPool.on_apply`` returns its future)."""
    replace(TaskPool, "on_apply", _tracking)


def _tracking(original):
    def on_apply(self, *args, **kwargs):
        result = original(self, *args, **kwargs)
        _track(result.f)
        return result

    return on_apply
