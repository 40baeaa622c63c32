"""The threads pool in a soft shutdown: the tasks still waiting for a free thread start no more, and the wait knows
a thread that is between taking a task and starting it.

Celery hands every task message it receives to its pool at once; a threads pool (a ``ThreadPoolExecutor``) queues
those beyond its threads. On RabbitMQ the worker's quorum queues have a prefetch per queue consumer (no global one),
so a worker consuming five queues with four threads holds up to twenty messages, and some wait there. In the soft
shutdown such a task started when a running one ended; the wait, which sees only the tasks that started
(``state.active_requests``), could find none running in between, end, and the exit stopped the task just started: it
ran again on the next worker (twice: a clean-clone CI run on RabbitMQ saw a task run twice after such an exit; this
race fits its log, though it was not reproduced end to end).

:func:`cancel_queued` cancels the queued ones when the wait begins: their messages stay unacked and go back to their
queues with the rest. :func:`pool_busy` is true while any task handed to the pool has not ended, started or not.
"""

from __future__ import annotations

import threading
from concurrent.futures import Future, ThreadPoolExecutor

from celery.concurrency.thread import TaskPool

_not_done: set[Future] = set()  # every task handed to a threads pool of this process that has not ended
_lock = threading.Lock()


def _track(future: Future) -> None:
    with _lock:
        _not_done.add(future)
    future.add_done_callback(_forget)  # runs at once when the future is already done


def _forget(future: Future) -> None:
    with _lock:
        _not_done.discard(future)


def pool_busy() -> bool:
    """Whether a task handed to a threads pool has not ended: running, about to start, or queued."""
    with _lock:
        return bool(_not_done)


def cancel_queued(pool) -> int:
    """Cancel the tasks waiting in a threads pool's queue; returns how many. The running ones go on. Nothing else is
    handed to this pool afterwards: after the wait the consumer starts no task (``start_nothing_more``)."""
    executor = getattr(pool, "executor", None)
    if not isinstance(executor, ThreadPoolExecutor):
        return 0  # solo runs its one task in the main thread; prefork has its own queue and cancel
    with _lock:
        tracked = list(_not_done)
    executor.shutdown(wait=False, cancel_futures=True)
    return sum(f.cancelled() for f in tracked)


def install() -> None:
    """Track every task a threads pool is handed (Celery's ``TaskPool.on_apply`` returns its future)."""
    if getattr(TaskPool.on_apply, "_graphfleet_tracked", False):
        return
    original = TaskPool.on_apply

    def on_apply(self, *args, **kwargs):
        result = original(self, *args, **kwargs)
        _track(result.f)
        return result

    on_apply._graphfleet_tracked = True
    TaskPool.on_apply = on_apply
