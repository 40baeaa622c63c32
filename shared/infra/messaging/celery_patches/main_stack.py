"""The main thread's stack, read from a signal handler: the handler runs on top of the code the signal interrupted.

Used by the soft-shutdown patches (:mod:`.soft_shutdown`, :mod:`.shutdown_acks`, :mod:`.shutdown_inflight`) to tell
what Celery's loop was doing when the signal came. Reading another thread's stack pauses the garbage collector around
``sys._current_frames()``: python/cpython#106883 (a deadlock in that call under a collection).

Applies to: celery 5.7 (its handler lives in ``celery/apps/worker.py``), Python 3.11 (``APPLIES_TO``). Delete with
:mod:`.soft_shutdown`; the collector pause, once the project's minimum Python has the fix of cpython#106883.
"""

from __future__ import annotations

import gc
import sys
import threading
from types import FrameType

APPLIES_TO = {"celery": ">=5.7,<5.8", "python": ">=3.11"}


def main_frames() -> list[FrameType]:
    """The main thread's frames, innermost first (from the main thread, its caller's frame outward).

    On the main thread, where Celery runs its signal handlers, the stack is the current one (``sys._getframe``).
    Another thread reads it with ``sys._current_frames()``, with the garbage collector paused: on CPython 3.11 a
    collection that starts inside that call can deadlock the process (it holds the runtime's thread-list lock
    while it allocates, and a finalizer run by the collection takes the lock again; python/cpython#106883, whose
    fix was not taken into 3.11)."""
    if threading.current_thread() is threading.main_thread():
        frame = sys._getframe(1)
    else:
        was_enabled = gc.isenabled()
        gc.disable()
        try:
            frame = sys._current_frames().get(threading.main_thread().ident)
        finally:
            if was_enabled:
                gc.enable()
    frames = []
    while frame is not None:
        frames.append(frame)
        frame = frame.f_back
    return frames


def main_thread_in(method) -> bool:
    """Whether the main thread (the one the signal handler interrupted) is running ``method``."""
    code = getattr(getattr(method, "__func__", method), "__code__", None)
    return any(frame.f_code is code for frame in main_frames())


def interrupted_at(handler_file: str = "celery/apps/worker.py") -> str:
    """Where the main thread was when the signal came (``file:line function``): the frame below Celery's handler,
    which runs on top of it. ``"?"`` when no handler is on the stack."""
    in_handler = False
    for frame in main_frames():
        if frame.f_code.co_filename.endswith(handler_file):
            in_handler = True
        elif in_handler:
            code = frame.f_code
            return f"{'/'.join(code.co_filename.split('/')[-3:])}:{frame.f_lineno} {code.co_name}"
    return "?"
