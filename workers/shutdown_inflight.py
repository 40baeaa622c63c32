"""The Redis message in flight to a worker that exits after its soft shutdown, read so that it is requeued, not lost."""

from __future__ import annotations

import logging
import threading
from queue import Empty

from workers.main_stack import main_thread_in

log = logging.getLogger(__name__)


def read_in_flight(consumer) -> int:
    """Redis: read the answer of the consumer's ``BRPOP`` in flight, so that a message the server already popped for
    this worker is held (and requeued by ``requeue_held``) instead of lost with the exit; returns 1 when one came.

    Redis pops the message when it answers ``BRPOP``; kombu holds it (its unacked hash) only once it read that answer,
    and the event loop that reads it is blocked by the signal handler. Kombu's ``Channel.close`` reads it the same way.
    Skipped when the interrupted main thread is inside that read; on a thread of its own, joined for at most the
    ``BRPOP`` timeout and a second (the server answers within the timeout)."""
    channel = getattr(getattr(consumer, "task_consumer", None), "channel", None)
    read = getattr(channel, "_brpop_read", None)
    if read is None or not getattr(channel, "_in_poll", None) or main_thread_in(read):
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
