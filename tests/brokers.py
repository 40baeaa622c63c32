"""Real brokers for the tests: a Redis Sentinel group and a RabbitMQ vhost. Nothing is mocked.

* :func:`sentinel_group` starts a primary and one replica (``redis-server``) on free loopback ports and three
  sentinels (``redis-server --sentinel``) monitoring them under the master name ``graphfleet``; ``.url`` is
  the ``sentinel://`` broker URL, ``.failover()`` moves the primary and waits until every sentinel says so.
* :func:`rabbit_vhost` uses the RabbitMQ server of this machine (``localhost:5672``, started when it is not
  running; ``scripts/ci_services.sh`` installs it on CI): a vhost and a user of their own, deleted afterwards;
  ``.restart()`` stops and starts the broker application and waits until it accepts connections again.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import socket
import subprocess
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import redis

from shared.infra.redis.conn import free_port
from tests.clusters import stop_processes

MASTER_NAME = "graphfleet"
RABBIT_HOST, RABBIT_PORT = "127.0.0.1", 5672


def _binary(name: str) -> str:
    found = shutil.which(name)
    if not found:
        raise RuntimeError(f"{name} is not installed (apt package redis-server)")
    return found


def _wait(predicate, what: str, timeout: float) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            if predicate():
                return
        except (redis.RedisError, OSError):
            pass
        time.sleep(0.1)
    raise RuntimeError(f"gave up waiting for {what}")


def _pairs(reply) -> dict[str, str]:
    """A ``SENTINEL REPLICAS`` entry (a flat list, RESP2) as a dict."""
    if isinstance(reply, dict):
        return reply
    return dict(zip(reply[::2], reply[1::2], strict=False))


@dataclass
class SentinelGroup:
    base: Path
    down_after_ms: int = 1000
    ports: list[int] = field(default_factory=list)  # primary, replica
    sentinel_ports: list[int] = field(default_factory=list)
    procs: dict[int, subprocess.Popen] = field(default_factory=dict)

    @property
    def url(self) -> str:
        return ";".join(f"sentinel://127.0.0.1:{p}/0" for p in self.sentinel_ports)

    def _spawn(self, port: int, args: list[str]) -> None:
        node_dir = self.base / str(port)
        node_dir.mkdir(parents=True, exist_ok=True)
        self.procs[port] = subprocess.Popen(
            [_binary("redis-server"), *args, "--port", str(port), "--bind", "127.0.0.1", "--dir", str(node_dir),
             "--logfile", str(node_dir / "redis.log"), "--daemonize", "no"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def start(self, timeout: float = 30.0) -> SentinelGroup:
        self.ports = [free_port(), free_port()]
        self.sentinel_ports = [free_port() for _ in range(3)]
        data = ["--save", "", "--appendonly", "yes", "--appendfsync", "everysec", "--maxmemory-policy", "noeviction"]
        self._spawn(self.ports[0], data)
        self._spawn(self.ports[1], [*data, "--replicaof", "127.0.0.1", str(self.ports[0])])
        for port in self.sentinel_ports:
            conf = self.base / f"sentinel-{port}.conf"
            conf.write_text(f"sentinel monitor {MASTER_NAME} 127.0.0.1 {self.ports[0]} 2\n"
                            f"sentinel down-after-milliseconds {MASTER_NAME} {self.down_after_ms}\n"
                            f"sentinel failover-timeout {MASTER_NAME} 10000\n"
                            f"sentinel parallel-syncs {MASTER_NAME} 1\n")
            self._spawn(port, [str(conf), "--sentinel"])
        _wait(self._formed, "the sentinel group to form", timeout)
        return self

    def _sentinel(self, port: int) -> redis.Redis:
        return redis.Redis(port=port, socket_timeout=2, decode_responses=True)

    def _formed(self) -> bool:
        for port in self.sentinel_ports:
            s = self._sentinel(port)
            replicas = [_pairs(r) for r in s.execute_command("SENTINEL", "REPLICAS", MASTER_NAME)]
            if not any(r.get("master-link-status") == "ok" and "s_down" not in r.get("flags", "") for r in replicas):
                return False  # a replica the sentinels would promote (NOGOODSLAVE otherwise)
            if len(s.execute_command("SENTINEL", "SENTINELS", MASTER_NAME)) < len(self.sentinel_ports) - 1:
                return False
        replica = redis.Redis(port=self.ports[1], socket_timeout=2)
        return replica.info("replication").get("master_link_status") == "up"

    def master_addr(self) -> tuple[str, int]:
        """The primary per the sentinels (all must agree)."""
        addrs = set()
        for port in self.sentinel_ports:
            host, p = self._sentinel(port).execute_command("SENTINEL", "GET-MASTER-ADDR-BY-NAME", MASTER_NAME)
            addrs.add((host, int(p)))
        if len(addrs) != 1:
            raise RuntimeError(f"the sentinels disagree on the primary: {addrs}")
        return addrs.pop()

    def failover(self, kill: bool = False, timeout: float = 60.0) -> tuple[str, int]:
        """Move the primary to the replica: ``SENTINEL FAILOVER`` (the old primary becomes a replica), or with
        ``kill`` SIGKILL the primary's process (the sentinels agree it is down and elect the replica).
        Returns the new primary's address once every sentinel reports it and it answers as a primary."""
        old = self.master_addr()
        if kill:
            proc = self.procs.pop(old[1])
            proc.kill()
            proc.wait(timeout=10)
        else:
            self._sentinel(self.sentinel_ports[0]).execute_command("SENTINEL", "FAILOVER", MASTER_NAME)

        def moved() -> bool:
            try:
                addr = self.master_addr()
            except RuntimeError:  # the sentinels do not agree yet
                return False
            role = redis.Redis(host=addr[0], port=addr[1], socket_timeout=2).execute_command("ROLE")
            return addr != old and role[0] in (b"master", "master")

        _wait(moved, "the sentinels to report a new primary", timeout)
        return self.master_addr()

    def stop(self) -> None:
        stop_processes(self.procs)


@contextlib.contextmanager
def sentinel_group(tmp_path: Path, down_after_ms: int = 1000):
    group = SentinelGroup(Path(tmp_path) / "sentinel", down_after_ms=down_after_ms)
    try:
        yield group.start()
    finally:
        group.stop()


# ---- RabbitMQ


def rabbit_listening(timeout: float = 1.0) -> bool:
    try:
        with socket.create_connection((RABBIT_HOST, RABBIT_PORT), timeout=timeout):
            return True
    except OSError:
        return False


def _ctl(*args: str, timeout: float = 120.0) -> str:
    ctl = shutil.which("rabbitmqctl")
    if not ctl:
        raise RuntimeError("rabbitmqctl not found: install rabbitmq-server (scripts/ci_services.sh)")
    done = subprocess.run([ctl, "-q", *args], capture_output=True, text=True, timeout=timeout)
    if done.returncode != 0:
        raise RuntimeError(f"rabbitmqctl {' '.join(args)} failed: {done.stderr.strip() or done.stdout.strip()}")
    return done.stdout


_RABBIT_FAILED: list[str] = []  # why RabbitMQ could not be started, once per process (later tests fail at once)


def ensure_rabbit(timeout: float = 300.0) -> None:
    """RabbitMQ accepting connections on localhost:5672: when it is not, ``scripts/ci_services.sh`` installs,
    starts or repairs it (a node whose application is stopped gets it started; a stuck node is restarted), one
    test process at a time (a file lock: pytest-xdist's processes may all find the port closed at once)."""
    if rabbit_listening():
        return
    if _RABBIT_FAILED:
        raise RuntimeError(_RABBIT_FAILED[0])
    if os.geteuid() != 0 and subprocess.run(["sudo", "-n", "true"], capture_output=True).returncode != 0:
        raise RuntimeError("RabbitMQ is not running on localhost:5672 and starting it needs root "
                           "(run scripts/ci_services.sh as root)")
    script = Path(__file__).resolve().parents[1] / "scripts" / "ci_services.sh"
    with open(Path(tempfile.gettempdir()) / "graphfleet-rabbit-start.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if rabbit_listening():
            return
        try:
            done = subprocess.run(["bash", str(script)], capture_output=True, text=True, timeout=timeout)
            said = f"exit {done.returncode}: {(done.stderr or done.stdout).strip()[-2000:]}"
        except subprocess.TimeoutExpired:
            said = f"still running after {timeout:.0f} s"
    if not rabbit_listening():
        _RABBIT_FAILED.append(f"RabbitMQ did not start (scripts/ci_services.sh {said})")
        raise RuntimeError(_RABBIT_FAILED[0])


@dataclass
class RabbitVhost:
    vhost: str
    user: str
    password: str

    @property
    def url(self) -> str:
        return f"amqp://{self.user}:{self.password}@{RABBIT_HOST}:{RABBIT_PORT}/{self.vhost}"

    def accepts(self) -> bool:
        from kombu import Connection

        with Connection(self.url, connect_timeout=2) as conn:
            conn.ensure_connection(max_retries=1)
            return conn.connected

    def restart(self, timeout: float = 120.0, down_s: float = 0.0) -> None:
        """Stop and start the broker application (every connection breaks; durable queues and persistent
        messages survive), ``down_s`` seconds apart, and wait until this vhost accepts connections again."""
        _ctl("stop_app", timeout=timeout)
        time.sleep(down_s)
        _ctl("start_app", timeout=timeout)
        _ctl("await_startup", timeout=timeout)
        _wait(self._accepts_quietly, "RabbitMQ to accept connections again", timeout)

    def _accepts_quietly(self) -> bool:
        try:
            return self.accepts()
        except Exception:  # noqa: BLE001 - not up yet
            return False


@contextlib.contextmanager
def rabbit_vhost():
    ensure_rabbit()
    tag = uuid.uuid4().hex[:12]
    vhost = RabbitVhost(vhost=f"gf-test-{tag}", user=f"gf-test-{tag}", password=uuid.uuid4().hex)
    _ctl("add_vhost", vhost.vhost)
    try:
        _ctl("add_user", vhost.user, vhost.password)
        _ctl("set_permissions", "-p", vhost.vhost, vhost.user, ".*", ".*", ".*")
        yield vhost
    finally:
        with contextlib.suppress(RuntimeError):
            _ctl("delete_user", vhost.user)
        with contextlib.suppress(RuntimeError):
            _ctl("delete_vhost", vhost.vhost)


def take_task_name(app, name: str) -> None:
    """Let a test's own task take the name of a product task on ``app``. The product's tasks are shared
    (Celery adds them to every app it finalizes once any test of this process imported ``workers``), and a
    shared task is added before the app's own pending ones, which then resolve to it: finalize first, then
    free the name."""
    app.finalize()
    app.tasks.pop(name, None)
