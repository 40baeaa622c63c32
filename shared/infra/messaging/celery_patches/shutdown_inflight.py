"""The Redis message in flight to a worker that exits after its soft shutdown, read so that it is requeued, not lost.

Upstream behaviour: Redis pops a message when it answers the consumer's ``BRPOP``; kombu holds it (its ``unacked``
hash) only once it has read that answer, on the event loop the signal handler blocks. Reads kombu's private
``Channel._brpop_read`` and ``_in_poll``, as kombu's own ``Channel.close`` does.

Applies to: kombu 5.7 (``APPLIES_TO``). Delete with :mod:`.soft_shutdown`.
"""

from __future__ import annotations

import logging
import threading
from queue import Empty

from shared.infra.messaging.celery_patches.main_stack import main_thread_in

APPLIES_TO = {"kombu": ">=5.7,<5.8"}
log = logging.getLogger(__name__)


def read_in_flight(consumer) -> int:
    """Redis: read the answer of the consumer's ``BRPOP`` in flight, so that a message the server already popped for
    this worker is held (and requeued by ``requeue_held``) instead of lost with the exit; returns 1 when one came.
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
