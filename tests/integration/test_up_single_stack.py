"""One ``graphfleet up`` per data directory, and the checks an ``up`` makes before it starts anything.

Real ``graphfleet up`` processes (``.venv/bin/graphfleet``, a temporary ``GRAPHFLEET_DATA_DIR``, free ports),
real embedded Redis, real workers and gateway; the CLI's verbs run as subprocesses, as typed in a shell."""

from __future__ import annotations

import os
import signal
import socket
import subprocess

import httpx
import pytest

from shared.infra.redis.conn import free_port
from tests.integration.cli_proc import BIN, ROOT, UpProcess, cli_env
from tests.integration.up_procs import children, redis_servers, wait_gone

pytestmark = [pytest.mark.integration, pytest.mark.own_servers]  # its own Redis: the layout changes nothing

UP = ["--processes", "1"]  # one process per worker group: the machine is shared


def _cli(*args: str, env: dict, cwd=ROOT, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([str(BIN / "graphfleet"), *args], env=env, cwd=cwd, capture_output=True, text=True,
                          timeout=timeout)


def test_second_up_on_the_same_data_dir_refuses_and_the_first_keeps_serving(tmp_path):
    """The second ``up`` exits 1 with one ``graphfleet: stack_running: ...`` line naming the first (pid, gateway
    URL), starts no redis-server, leaves the metrics directory and ``stack.json`` as they were; the first stack
    still serves, and ``graphfleet backup`` reaches it. Before, the second started a redis-server on the same AOF
    file, wiped the metrics, and deleted ``stack.json`` on exit (backup: "no running stack")."""
    data = tmp_path / "data"
    env = cli_env(data)
    with UpProcess(["--port", str(free_port()), *UP], env) as first:
        first.wait_for("Ctrl-C to stop")
        gateway = first.field("gateway")
        assert first.field("LLM").startswith("none: LLM-free"), first.lines
        stack_json = (data / "stack.json").read_text()
        metrics = sorted(p.name for p in (data / "metrics").iterdir())
        assert metrics and len(redis_servers(data)) == 1

        second = _cli("up", "--port", str(free_port()), *UP, env=env)
        assert second.returncode == 1, second
        lines = second.stderr.splitlines()
        assert len(lines) == 1 and lines[0].startswith("graphfleet: stack_running: "), second.stderr
        assert f"pid {first.proc.pid}" in lines[0] and gateway in lines[0], lines
        assert "Traceback" not in second.stdout + second.stderr
        assert len(redis_servers(data)) == 1
        assert (data / "stack.json").read_text() == stack_json
        assert set(metrics) <= {p.name for p in (data / "metrics").iterdir()}  # not wiped

        assert httpx.get(f"{gateway}/healthz", timeout=30).status_code == 200
        backup = _cli("backup", "--out", str(tmp_path / "backup.gf"), env=env, cwd=tmp_path)
        assert backup.returncode == 0, backup.stderr
        assert (tmp_path / "backup.gf").stat().st_size > 0
        assert first.stop() == 0


@pytest.mark.slow  # three stacks start one after the other: over a minute
def test_up_starts_again_after_a_stopped_and_after_a_killed_stack(tmp_path):
    """The data directory's lock goes with its stack: after a stopped ``up``, and after one killed with SIGKILL
    (the kernel drops the lock; its children, out of the terminal's process group, die with it), the next
    ``up`` on the same directory starts."""
    data = tmp_path / "data"
    env = cli_env(data)
    with UpProcess(["--port", str(free_port()), *UP], env) as up:
        up.wait_for("Ctrl-C to stop")
        assert up.stop() == 0
    with UpProcess(["--port", str(free_port()), *UP], env) as up:
        up.wait_for("Ctrl-C to stop")
        procs = children(up.proc.pid)
        assert redis_servers(data), procs
        os.kill(up.proc.pid, signal.SIGKILL)
        up.proc.wait()
        assert not wait_gone(procs), "children of a killed graphfleet up left running"
    with UpProcess(["--port", str(free_port()), *UP], env) as up:
        up.wait_for("Ctrl-C to stop")
        assert len(redis_servers(data)) == 1
        assert up.stop() == 0
    assert not redis_servers(data)


def test_up_on_a_port_in_use_says_so_and_starts_nothing(tmp_path):
    """A taken gateway port is named before anything starts: one ``graphfleet: port_in_use: port N is already in
    use`` line, exit 1, no redis-server, no ``stack.json``. Before, the stack started Redis and the workers and
    then failed with "gateway exited with 3; see logs"."""
    data = tmp_path / "data"
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        done = _cli("up", "--port", str(port), *UP, env=cli_env(data))
    assert done.returncode == 1, done
    assert done.stderr.splitlines() == [done.stderr.strip()], done.stderr
    assert done.stderr.startswith(f"graphfleet: port_in_use: port {port} is already in use"), done.stderr
    assert not redis_servers(data)
    assert not (data / "stack.json").exists() and not (data / "redis").exists()
