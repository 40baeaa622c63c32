"""The acks (and rejects) of finished tasks, run from the signal handler while Celery's soft shutdown blocks its
event loop.

Upstream behaviour: Celery settles a delivered task's message on its event loop: the finished task's thread calls
``Consumer.call_soon_ack``, which puts ``message.ack_log_error`` (or ``reject_log_error``) on the hub. Its soft
shutdown waits in the signal handler on top of that loop, so a task that finished in the wait kept its message
unacked and ran again elsewhere (the acks_late case of celery/celery#3802). Taking the settles from the hub's ready
set misses those the interrupted loop had already taken off it (``Hub._pop_ready``) but not run, and all of them
when the signal came while the loop held that set's lock.

So :func:`install` wraps what ``call_soon_ack`` schedules for a message in a :class:`Settle`, listed until it has
run, and :func:`flush_acks` runs every listed settle whose message is still unsettled, wherever it waits: on the hub,
in the loop's taken batch, or interrupted inside its own call. A settle runs once: one that comes second finds it
claimed (or its message settled) and does nothing.

A worker that exits after the wait (its interrupted code never goes on) runs the acks on the handler's own thread,
which owns whatever the interrupted code held: redis-py's connection pool lock is re-entrant, and a signal in a pool
call (the loop's own ack, a ``BRPOP``) came with it held. py-amqp writes every frame of a connection under one plain
lock (``method_framing.frame_writer``). A signal that comes while the loop writes a frame (an ack, a heartbeat) runs
the handler with that lock held, and every ack sent after it would wait for it for ever. An exiting worker then
releases that lock for its acks (sent on a thread of their own, joined for at most ``ACK_JOIN_S``), and does not send
again an ack whose frame the interrupted code had handed to the socket. A prefork worker goes back to Celery, and its
loop goes on: there the acks run on a thread of their own, and are left to the loop while it holds the frame lock
(:func:`interrupted_write`).

Applies to: celery 5.7, kombu 5.7, amqp 5.4 (``APPLIES_TO``). Delete with :mod:`.soft_shutdown`, when Celery's soft
shutdown runs the acks of the tasks that finish during its wait.
"""

from __future__ import annotations

import itertools
import logging
import threading
from dataclasses import dataclass

from celery.worker.consumer.consumer import Consumer
from kombu.message import Message

from shared.infra.messaging.celery_patches.main_stack import main_frames
from shared.infra.messaging.celery_patches.patching import replace

APPLIES_TO = {"celery": ">=5.7,<5.8", "kombu": ">=5.7,<5.8", "amqp": ">=5.4,<5.5"}
PATCHES = ("celery.worker.consumer.consumer:Consumer.call_soon_ack",)
log = logging.getLogger(__name__)
ACK_JOIN_S = 5.0
# settles scheduled and not run yet, by id. No lock: the signal handler runs on the thread it interrupted, so a lock
# held there would never be released; single dict operations are atomic under the GIL
_pending: dict[int, Settle] = {}
_released: list = []  # the frame locks released for the acks of an exit (once each; kept, so no id is reused)
AMQP_WRITE, AMQP_FRAMING = "amqp/transport.py", "amqp/method_framing.py"


class Settle:
    """One message's ack or reject as Celery scheduled it; runs at most once whoever calls it."""

    __slots__ = ("fun", "message", "args", "kwargs", "claims")

    def __init__(self, fun, message: Message, args: tuple, kwargs: dict):
        self.fun, self.message, self.args, self.kwargs = fun, message, args, kwargs
        self.claims = itertools.count()  # next() is atomic: the first caller gets 0

    def __call__(self):
        if next(self.claims):
            return None
        return self.run()

    def run(self):
        try:
            if not self.message.acknowledged:
                return self.fun(*self.args, **self.kwargs)
            return None
        finally:
            _pending.pop(id(self), None)


_SETTLE_CALL = Settle.__call__.__code__  # how the settle the interrupted thread was running is found on its stack


@dataclass
class MainThread:
    """What the interrupted main thread was doing, read from its stack (the signal handler runs on top of it)."""

    settle: Settle | None = None  # the settle it was running
    write_lock: object = None  # the lock of the py-amqp frame it was writing (held)
    sent: bool = False  # that frame was handed to the socket


def interrupted_write() -> MainThread:
    """The settle the main thread was running, and the py-amqp frame it was writing, when the signal came."""
    seen = MainThread()
    frames = list(main_frames())
    for inner, frame in zip([None, *frames], frames, strict=False):
        code = frame.f_code
        if code is _SETTLE_CALL and seen.settle is None:
            seen.settle = frame.f_locals.get("self")
        elif code.co_filename.endswith(AMQP_WRITE) and code.co_name == "write":
            seen.sent = True
        elif code.co_filename.endswith(AMQP_FRAMING) and code.co_name == "write_frame":
            # inside its ``with buffer_lock`` once it called ``_write_frame``: then it holds the lock
            seen.write_lock = frame.f_locals.get("buffer_lock") if inner is not None else None
    return seen


def install() -> None:
    """List every settle Celery's consumer schedules (before a consumer exists: it binds ``call_soon_ack`` once)."""
    replace(Consumer, "call_soon_ack", _listing_settles)


def _listing_settles(original):
    def call_soon_ack(self, p, *args, **kwargs):
        message = getattr(p, "__self__", None)
        if not isinstance(message, Message):
            return original(self, p, *args, **kwargs)
        settle = Settle(p, message, args, kwargs)
        _pending[id(settle)] = settle
        return original(self, settle)

    return call_soon_ack


def flush_acks(exiting: bool = True) -> int:
    """Run the settles scheduled and not run whose message is unsettled; returns how many. ``exiting``: the interrupted
    main thread never goes on (else it does, and what it holds or runs is left to it). Exiting, on this thread unless
    the interrupted code held py-amqp's frame lock; else on a thread of their own, joined for at most ``ACK_JOIN_S``."""
    main = interrupted_write()
    if main.write_lock is not None and not exiting:
        return 0  # the loop holds the frame lock: it sends them once the handler returns
    due = [s.__call__ for s in _pending.copy().values() if s is not main.settle and not s.message.acknowledged]
    if exiting and main.settle is not None and not main.sent and not main.settle.message.acknowledged:
        due.append(main.settle.run)  # claimed by the interrupted thread, which never goes on: its frame is not out
    if not due:
        return 0
    if exiting and main.write_lock is None:
        # on this thread: it owns what the interrupted code held, which never goes on. A Redis ack takes redis-py's
        # connection pool lock (re-entrant), held by the main thread when the signal came in a pool call: a thread
        # of its own waited for it until ACK_JOIN_S, and the exit then requeued the finished task's message
        _run_all(due)
        return len(due)
    if main.write_lock is not None and not any(lock is main.write_lock for lock in _released):
        _released.append(main.write_lock)
        main.write_lock.release()  # held by the interrupted thread, which never goes on
    thread = threading.Thread(target=_run_all, args=(due,), name="graphfleet-shutdown-acks", daemon=True)
    thread.start()
    thread.join(ACK_JOIN_S)
    if thread.is_alive():
        log.warning("soft shutdown: the acks did not finish in %.0f s; their messages come back", ACK_JOIN_S)
    return len(due)


def _run_all(settles: list) -> None:
    for settle in settles:
        try:
            settle()
        except Exception:  # noqa: BLE001 - one failed ack (logged) must not keep the others from running
            log.exception("an ack in the soft shutdown failed; its message comes back")
