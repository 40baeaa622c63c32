"""The processes of a running ``graphfleet up``, seen from outside (psutil): its children, its redis-server."""

from __future__ import annotations

import time
from pathlib import Path

import psutil

SAFETY_TIMEOUT_S = 60.0  # a process that never ends fails the test instead of hanging it; never a pass criterion


def gone(proc: psutil.Process) -> bool:
    """Exited (a zombie not yet reaped by its parent counts as exited)."""
    try:
        return not proc.is_running() or proc.status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def children(pid: int) -> list[psutil.Process]:
    """Every process ``pid`` started, and theirs."""
    return psutil.Process(pid).children(recursive=True)


def named(procs: list[psutil.Process], word: str) -> list[psutil.Process]:
    """The processes whose command line contains ``word``."""
    found = []
    for proc in procs:
        try:
            if any(word in part for part in proc.cmdline()):
                found.append(proc)
        except psutil.Error:
            pass
    return found


def redis_servers(data_dir: Path) -> list[psutil.Process]:
    """The live redis-servers working in ``data_dir``'s ``redis`` directory (a stack's embedded one: redis-server
    moves into its ``--dir`` and rewrites its command line, so the directory is where it runs)."""
    redis_dir = str(Path(data_dir) / "redis")
    found = []
    for proc in psutil.process_iter():
        try:
            if proc.name().startswith("redis-server") and proc.cwd() == redis_dir and not gone(proc):
                found.append(proc)
        except psutil.Error:
            pass
    return found


def wait_gone(procs: list[psutil.Process], timeout: float = SAFETY_TIMEOUT_S) -> list[psutil.Process]:
    """Wait until every process of ``procs`` has exited; the ones still running after ``timeout``."""
    deadline = time.monotonic() + timeout
    while (left := [p for p in procs if not gone(p)]) and time.monotonic() < deadline:
        time.sleep(0.1)
    return left
