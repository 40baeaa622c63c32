"""The main thread's stack, read from a signal handler: the handler runs on top of the code the signal interrupted."""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator


def main_frames() -> Iterator:
    """The main thread's frames, innermost first."""
    frame = sys._current_frames().get(threading.main_thread().ident)
    while frame is not None:
        yield frame
        frame = frame.f_back


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
