"""The acks a Celery worker's event loop holds when its soft shutdown blocks it, run from the signal handler; and
the Redis message in flight to a worker that exits, read so that it is requeued rather than lost.

Celery runs acks on its event loop (``Consumer.call_soon_ack`` puts them on the hub); its soft shutdown waits in the
signal handler on top of that loop, so a task that finished in the wait kept its message unacked and ran again
elsewhere. ``workers.soft_shutdown`` calls :func:`flush_acks` every poll of its wait.
"""

from __future__ import annotations

import logging
import sys
import threading
from queue import Empty

from kombu.message import Message

log = logging.getLogger(__name__)
ACK_JOIN_S = 5.0
ACK_NAMES = ("ack_log_error", "reject_log_error")  # what Celery's call_soon_ack schedules for a delivered task


def is_ack(callback) -> bool:
    """Whether a callback on the hub is a message's ack or reject: ``promise(promise(message.ack_log_error))``."""
    inner = getattr(callback, "fun", None)
    target = getattr(inner, "fun", inner)
    return getattr(target, "__name__", "") in ACK_NAMES and isinstance(getattr(target, "__self__", None), Message)


def flush_acks(consumer) -> int:
    """Run the acks and rejects waiting on the consumer's event loop; returns how many. On a thread of their own,
    joined for at most ``ACK_JOIN_S`` (the handler runs on top of whatever the main thread held, maybe a lock an ack
    needs); the hub's lock is taken with a timeout for the same reason (left alone, those acks are lost as before)."""
    hub = getattr(consumer, "hub", None)
    if hub is None or not hub._ready_lock.acquire(timeout=0.2):
        return 0
    try:
        acks = [c for c in hub._ready if is_ack(c)]
        hub._ready.difference_update(acks)
    finally:
        hub._ready_lock.release()
    if acks:
        thread = threading.Thread(target=_run_all, args=(acks,), name="graphfleet-shutdown-acks", daemon=True)
        thread.start()
        thread.join(ACK_JOIN_S)
    return len(acks)


def _run_all(acks: list) -> None:
    for ack in acks:
        try:
            ack()
        except Exception:  # noqa: BLE001 - one failed ack (logged) must not keep the others from running
            log.exception("an ack in the soft shutdown failed; its message comes back")


def read_in_flight(consumer) -> int:
    """Redis: read the answer of the consumer's ``BRPOP`` in flight, so that a message the server already popped for
    this worker is held (and requeued by ``requeue_held``) instead of lost with the exit; returns 1 when one came.

    Redis pops the message when it answers ``BRPOP``; kombu holds it (its unacked hash) only once it read that answer,
    and the event loop that reads it is blocked by the signal handler. Kombu's ``Channel.close`` reads it the same way.
    Skipped when the interrupted main thread is inside that read; on a thread of its own, joined for at most the
    ``BRPOP`` timeout and a second (the server answers within the timeout)."""
    channel = getattr(getattr(consumer, "task_consumer", None), "channel", None)
    read = getattr(channel, "_brpop_read", None)
    if read is None or not getattr(channel, "_in_poll", None) or _main_thread_in(read):
        return 0
    got: list[bool] = []

    def run() -> None:
        try:
            got.append(bool(read()))
        except Empty:  # the BRPOP timed out: nothing was in flight
            pass
        except Exception:  # noqa: BLE001 - the message (if any) comes back after the visibility timeout, as before
            log.exception("could not read the BRPOP answer in flight")

    thread = threading.Thread(target=run, name="graphfleet-read-in-flight", daemon=True)
    thread.start()
    thread.join(float(getattr(channel, "brpop_timeout", 1) or 1) + 1.0)
    return int(any(got))


def _main_thread_in(method) -> bool:
    """Whether the main thread (the one the signal handler interrupted) is running ``method``."""
    code = getattr(getattr(method, "__func__", method), "__code__", None)
    frame = sys._current_frames().get(threading.main_thread().ident)
    while frame is not None:
        if frame.f_code is code:
            return True
        frame = frame.f_back
    return False
