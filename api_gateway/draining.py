"""Held requests end when the gateway stops.

A request held with ``?wait`` (``GET /v1/jobs/{id}?wait=60``) would keep a stopping gateway up for its whole
wait: uvicorn's graceful shutdown waits for every request in flight, and cancelling them past a timeout answers
500. So the gateway notes the stop signal (SIGTERM, SIGINT) as it arrives, before uvicorn's own handler runs,
and every held wait returns at once: the request answers the job's current state (``Retry-After`` while it
runs), the client asks again, and the connection closes."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import threading
from collections.abc import Awaitable

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


class Draining:
    """Set once the process was asked to stop; :meth:`until` races a wait against it."""

    def __init__(self) -> None:
        self.event: asyncio.Event | None = None  # made on the serving event loop (install)

    def install(self) -> Draining:
        """Chain a handler in front of the current ones (uvicorn's, inside its server); in the main thread only
        (an in-process test client runs the app in another thread, and the process's signals are not its)."""
        self.event = asyncio.Event()
        if threading.current_thread() is not threading.main_thread():
            return self
        loop, event = asyncio.get_running_loop(), self.event
        for sig in STOP_SIGNALS:
            previous = signal.getsignal(sig)

            def handler(signum, frame, previous=previous):
                loop.call_soon_threadsafe(event.set)
                if callable(previous):
                    previous(signum, frame)

            signal.signal(sig, handler)
        return self

    async def until(self, wait: Awaitable[bool]) -> bool:
        """``wait``'s result, or False as soon as the process is stopping."""
        if self.event is None:
            return await wait
        task = asyncio.ensure_future(wait)
        stopping = asyncio.ensure_future(self.event.wait())
        try:
            await asyncio.wait({task, stopping}, return_when=asyncio.FIRST_COMPLETED)
        except BaseException:  # the request itself cancelled (its client went away)
            task.cancel()
            raise
        finally:
            stopping.cancel()
        if task.done():
            return task.result()
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        return False
