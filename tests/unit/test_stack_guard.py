"""The checks a stack makes before it starts: the data directory's lock and a free gateway port (real files,
real sockets, a real process holding the lock)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys

import pytest

from graphfleet_cli.stack_guard import DataDirLock, StackStartRefused, check_port_free

HOLD = ("import sys, time; from graphfleet_cli.stack_guard import DataDirLock; "
        "DataDirLock(sys.argv[1]).acquire('http://127.0.0.1:18080'); print('held', flush=True); time.sleep(600)")


def test_a_second_lock_on_a_data_dir_is_refused_with_the_holder(tmp_path):
    first = DataDirLock(tmp_path).acquire("http://127.0.0.1:18080")
    try:
        with pytest.raises(StackStartRefused) as refused:
            DataDirLock(tmp_path).acquire()
        assert refused.value.code == "stack_running"
        assert f"pid {os.getpid()}, gateway http://127.0.0.1:18080" in str(refused.value)
    finally:
        first.release()
    DataDirLock(tmp_path).acquire().release()  # released: the next one takes it


def test_the_lock_of_a_killed_holder_is_free(tmp_path):
    """SIGKILL leaves no stale lock: the kernel drops it with the process."""
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(tmp_path)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(StackStartRefused, match=f"pid {holder.pid}"):
            DataDirLock(tmp_path).acquire()
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    DataDirLock(tmp_path).acquire().release()


def test_a_port_in_use_is_named():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        with pytest.raises(StackStartRefused, match=f"port {port} is already in use") as refused:
            check_port_free(port)
        assert refused.value.code == "port_in_use"
    check_port_free(port)  # closed: free again


def test_a_stack_file_left_by_a_killed_stack_is_no_running_stack(tmp_path, monkeypatch):
    """A SIGKILLed stack leaves its ``stack.json``: local commands say there is no stack instead of trying to
    connect to its Redis, which is gone; while the holder lives, the file is used."""
    from graphfleet_cli.errors import CliError
    from graphfleet_cli.stack import resolve_redis_url
    from shared.config import get_settings
    from shared.infra.redis.conn import write_stack_info

    monkeypatch.delenv("GRAPHFLEET_REDIS_URL", raising=False)
    get_settings.cache_clear()
    write_stack_info(tmp_path, {"redis_url": "redis://127.0.0.1:1/0"})
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(tmp_path)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        assert resolve_redis_url(tmp_path) == "redis://127.0.0.1:1/0"
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    with pytest.raises(CliError, match="no running stack") as refused:
        resolve_redis_url(tmp_path)
    assert refused.value.code == "no_stack"
