"""The acks a Celery worker's event loop holds when its soft shutdown blocks it, run from the signal handler.

Celery runs acks on its event loop (``Consumer.call_soon_ack`` puts them on the hub); its soft shutdown waits in the
signal handler on top of that loop, so a task that finished in the wait kept its message unacked and ran again
elsewhere. ``workers.soft_shutdown`` calls :func:`flush_acks` every poll of its wait.
"""

from __future__ import annotations

import logging
import threading

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
