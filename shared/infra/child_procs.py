"""Child processes that end with the process that started them.

The embedded stack's children (redis-server, the workers, the gateway) run in sessions of their own, so the
terminal's Ctrl-C (SIGINT to its foreground process group) reaches only ``graphfleet up``, which then stops
them in order. Out of the terminal's group they would also outlive a ``graphfleet up`` killed with SIGKILL;
``PR_SET_PDEATHSIG`` has the kernel send them SIGTERM when it goes. The kernel ties that signal to the thread
that started the child, so a thread that starts children must outlive them (``graphfleet_cli.stack.Supervisor``).
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
from collections.abc import Callable

PR_SET_PDEATHSIG = 1


def _prctl():
    try:
        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):  # not Linux: no such call
        return None


_PRCTL = _prctl() if sys.platform.startswith("linux") else None


def die_with_parent(sig: int = signal.SIGTERM) -> Callable[[], None] | None:
    """A ``preexec_fn`` for ``subprocess.Popen``: the child gets ``sig`` when this process ends (and exits at once
    when this process ended before the child could ask for it); None where the kernel has no such call."""
    if _PRCTL is None:
        return None
    parent = os.getpid()

    def preexec() -> None:
        _PRCTL(PR_SET_PDEATHSIG, int(sig), 0, 0, 0)
        if os.getppid() != parent:  # the parent died between fork and prctl: nobody would send the signal
            os._exit(1)

    return preexec


def own_session_kwargs(sig: int = signal.SIGTERM) -> dict:
    """``subprocess.Popen`` keywords of a stack child: its own session and process group (no terminal
    signals), and ``sig`` when this process ends."""
    return {"start_new_session": True, "preexec_fn": die_with_parent(sig)}
