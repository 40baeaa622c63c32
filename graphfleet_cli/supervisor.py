"""The supervisor of a stack: restarts any worker group or gateway process that exits while the stack is up
(after 1, 2, 4 ... up to 30 s), puts back the messages a dead worker held, and gives a process up after
``MAX_RESTARTS`` exits within ``RESTART_WINDOW_S`` (``graphfleet_cli.stack`` describes the whole).

The processes it restarts are started from its thread, and the kernel ties their die-with-the-parent signal
(``shared.infra.child_procs``) to that thread: so the thread, once halted, lives on until the stack has stopped
every child (:meth:`Supervisor.release`), or the restarted ones would be signalled before the gateway stops."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from shared.infra.queueing import lease_renew_interval

if TYPE_CHECKING:
    from graphfleet_cli.stack import Stack

MAX_RESTARTS = 5  # exits within RESTART_WINDOW_S after which a process is given up
RESTART_WINDOW_S = 300.0
BACKOFF_S = (1.0, 30.0)  # first delay before a restart, and the longest
RECLAIM_MARGIN_S = 2.0  # a dead worker's messages are put back 2 lease intervals + this after its exit


class Supervisor:
    """Restarts the processes of a stack when they exit; gives a process up after repeated crashes."""

    def __init__(self, stack: Stack, say: Callable[[str], None] | None = None):
        self.stack = stack
        self.say = say or (lambda line: print(line, file=sys.stderr, flush=True))
        self.exits: dict[str, list[float]] = {}
        self.due: dict[str, float] = {}
        self.restarts = 0
        self.reclaims: list[tuple[float, float, str]] = []  # (when, exit time, worker): see reclaim_due
        self.reclaimed = 0  # messages put back so far
        self._stop = threading.Event()
        self._released = threading.Event()
        self._checking = threading.Lock()  # held while a check (and a restart) runs
        self._thread: threading.Thread | None = None

    def start(self) -> Supervisor:
        self._thread = threading.Thread(target=self._loop, name="graphfleet-supervisor", daemon=True)
        self._thread.start()
        return self

    def halt(self) -> None:
        """Restart nothing from now on (returns once a restart under way is done); the thread lives on."""
        self._stop.set()
        with self._checking:
            pass

    def release(self) -> None:
        """End the thread, once the stack has stopped every process (the ones it restarted too)."""
        self.halt()
        self._released.set()
        if self._thread is not None:
            self._thread.join(10)

    stop = release

    def _loop(self) -> None:
        while not self._stop.wait(0.2) and self.stack.failure is None:
            with self._checking:
                if self._stop.is_set():
                    break
                try:
                    self.check(time.time())
                except Exception as exc:  # noqa: BLE001 - a failed restart is retried at the next check
                    self.say(f"graphfleet: supervisor error: {exc!r}")
        self._released.wait()  # the processes started from this thread get their parent-death signal when it ends

    def check(self, now: float) -> None:
        self.reclaim_due(now)
        for name, proc in list(self.stack.procs):
            if proc.poll() is None or self._stop.is_set():
                continue
            if name not in self.due:
                self._exited(name, proc.returncode, now)
                if self.stack.failure is not None:
                    return
            elif now >= self.due[name]:
                del self.due[name]
                self._replace(name, proc)

    def _replace(self, name: str, dead) -> None:
        if not any(p is dead for _n, p in self.stack.procs):
            return  # taken out of the stack meanwhile (stopped, or replaced by hand)
        new = self.stack.respawn(name)
        self.stack.procs = [(n, new if p is dead else p) for n, p in self.stack.procs]
        self.restarts += 1
        self.say(f"graphfleet: restarted {name} (pid {new.pid})")

    def reclaim_due(self, now: float) -> None:
        """Put back the messages of the workers that died at least two lease intervals ago."""
        due = [r for r in self.reclaims if r[0] <= now]
        self.reclaims = [r for r in self.reclaims if r[0] > now]
        for _when, died_at, name in due:
            count = self.stack.reclaim(died_at)
            if count:
                self.reclaimed += count
                self.say(f"graphfleet: put back {count} message(s) that {name} held when it exited")

    def _exited(self, name: str, code: int | None, now: float) -> None:
        if name != "gateway":  # a worker's unacked messages come back without waiting for the visibility timeout
            wait = 2 * lease_renew_interval(self.stack.settings) + RECLAIM_MARGIN_S
            self.reclaims.append((now + wait, now, name))
        recent = [t for t in self.exits.get(name, []) if now - t < RESTART_WINDOW_S] + [now]
        self.exits[name] = recent
        if len(recent) >= MAX_RESTARTS:
            self.stack.failure = (f"{name} exited {len(recent)} times within {RESTART_WINDOW_S:.0f} s (last exit "
                                  f"code {code}); giving up, see {self.stack.log_dir}")
            self.say(f"graphfleet: {self.stack.failure}")
            return
        delay = min(BACKOFF_S[1], BACKOFF_S[0] * 2 ** (len(recent) - 1))
        self.due[name] = now + delay
        self.say(f"graphfleet: {name} exited with {code}; restarting in {delay:.0f} s "
                 f"(exit {len(recent)} of {MAX_RESTARTS} allowed within {RESTART_WINDOW_S:.0f} s)")
