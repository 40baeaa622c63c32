"""What a stack checks before it starts anything: that no other stack runs on its data directory, and that its
gateway port is free.

One stack per data directory: two embedded redis-servers on one AOF file can lose data, and a second stack
would also wipe the first one's metrics directory and take over its ``stack.json``. The guard is an exclusive
``flock`` on ``<data_dir>/stack.lock``, held for the stack's life; the kernel drops it when the process ends,
however it ends, so a stack killed with SIGKILL never blocks the next one. Its descriptor is not inherited by
the stack's children (Python's default), so only the stack itself holds it."""

from __future__ import annotations

import errno
import fcntl
import json
import os
import socket
from pathlib import Path

from shared.infra.redis.conn import read_stack_info

LOCK_NAME = "stack.lock"


class StackStartRefused(RuntimeError):
    """A stack that may not start; ``code`` is the CLI's error code."""

    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code = code


class DataDirLock:
    """The exclusive lock of a data directory, with the holder's pid (and gateway URL once known) in the file."""

    def __init__(self, data_dir: Path):
        self.path = Path(data_dir) / LOCK_NAME
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(self, gateway_url: str | None = None) -> DataDirLock:
        """Take the lock, or raise :class:`StackStartRefused` naming the stack that holds it."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(fd)
            if exc.errno not in (errno.EAGAIN, errno.EACCES):
                raise
            raise StackStartRefused("stack_running", self._running_message()) from None
        self._fd = fd
        self.record(gateway_url)
        return self

    def record(self, gateway_url: str | None) -> None:
        """Write this stack's pid and gateway URL into the lock file (what a refused second stack reports)."""
        if self._fd is None:
            return
        data = json.dumps({"pid": os.getpid(), "gateway_url": gateway_url}).encode()
        os.ftruncate(self._fd, 0)
        os.pwrite(self._fd, data, 0)

    def release(self) -> None:
        """Drop the lock (the file stays: removing it could let two stacks lock two different files)."""
        if self._fd is not None:
            os.close(self._fd)  # closing the only descriptor releases the flock
            self._fd = None

    def holder(self) -> dict:
        """The running stack's pid and gateway URL, from the lock file, else its ``stack.json``."""
        try:
            info = json.loads(self.path.read_text() or "{}")
        except (OSError, ValueError):
            info = {}
        return info or read_stack_info(self.path.parent) or {}

    def _running_message(self) -> str:
        info = self.holder()
        where = f"pid {info.get('pid', '?')}"
        if info.get("gateway_url"):
            where += f", gateway {info['gateway_url']}"
        return (f"a stack is already running on data directory {self.path.parent} ({where}); stop it first, "
                "or set GRAPHFLEET_DATA_DIR to another directory")


def stack_alive(data_dir: Path) -> bool:
    """Whether a stack holds the lock of ``data_dir``: a ``stack.json`` left by a stack killed with SIGKILL (no
    exit handler removed it) names a Redis that is gone, and local commands should say there is no stack rather
    than fail to connect. No lock file at all: a stack from before the lock, trusted."""
    path = Path(data_dir) / LOCK_NAME
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return True
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError as exc:
        return exc.errno in (errno.EAGAIN, errno.EACCES)
    finally:
        os.close(fd)  # also drops the shared lock taken just now
    return False


def check_port_free(port: int, host: str = "127.0.0.1") -> None:
    """Raise :class:`StackStartRefused` when ``port`` cannot be listened on, as the gateway would (address reuse
    on, so a port left in TIME_WAIT by a stopped stack counts as free)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
            sock.listen(1)
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                raise StackStartRefused("port_in_use", f"port {port} is already in use; choose another with "
                                        "--port") from None
            raise StackStartRefused("port_unavailable", f"cannot listen on port {port}: {exc.strerror}") from None
