"""A real Redis Cluster for the tests: ``masters`` redis-server processes in cluster mode on loopback ports
(each with ``replicas`` replicas), joined by ``redis-cli --cluster create``. Nothing is mocked."""

from __future__ import annotations

import random
import shutil
import socket
import subprocess
import time
from pathlib import Path

import redis


def _binary(name: str) -> str:
    found = shutil.which(name)
    if not found:
        raise RuntimeError(f"{name} is not installed (apt package redis-server; scripts/ci_tools.sh installs it)")
    return found


def stop_processes(procs: dict, graceful: bool = True) -> None:
    """Stop the servers a test started (SIGTERM, or SIGKILL when not ``graceful``), wait for each, kill what
    lingers, and forget them."""
    for proc in procs.values():
        if proc.poll() is None and graceful:
            proc.terminate()
        elif proc.poll() is None:
            proc.kill()
    for proc in procs.values():
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
    procs.clear()

class RedisClusterServers:
    """Start with :meth:`start`; ``url`` is the ``redis+cluster://`` URL graphfleet connects with."""

    def __init__(self, data_dir: Path, masters: int = 3, replicas: int = 1):
        self.data_dir = Path(data_dir)
        self.masters, self.replicas = masters, replicas
        self.ports = [cluster_port() for _ in range(masters * (1 + replicas))]
        self.procs: dict[int, subprocess.Popen] = {}

    @property
    def url(self) -> str:
        return f"redis+cluster://127.0.0.1:{self.ports[0]}/0"

    def _start_node(self, port: int) -> subprocess.Popen:
        node_dir = self.data_dir / str(port)
        node_dir.mkdir(parents=True, exist_ok=True)
        return subprocess.Popen(
            [_binary("redis-server"), "--port", str(port), "--bind", "127.0.0.1", "--cluster-enabled", "yes",
             "--cluster-config-file", "nodes.conf", "--cluster-node-timeout", "2000", "--dir", str(node_dir),
             "--appendonly", "yes", "--appendfsync", "everysec", "--save", "", "--protected-mode", "yes",
             "--logfile", str(node_dir / "redis.log"), "--cluster-replica-validity-factor", "0"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def start(self, timeout: float = 60.0) -> RedisClusterServers:
        for port in self.ports:
            self.procs[port] = self._start_node(port)
        for port in self.ports:
            _wait_ping(port, timeout)
        nodes = [f"127.0.0.1:{p}" for p in self.ports]
        subprocess.run([_binary("redis-cli"), "--cluster", "create", *nodes, "--cluster-replicas",
                        str(self.replicas), "--cluster-yes"], check=True, capture_output=True, timeout=timeout)
        self.wait_ok(timeout)
        return self

    def wait_ok(self, timeout: float = 60.0) -> None:
        """Until every live node says ``cluster_state:ok`` and sees every slot served."""
        deadline = time.time() + timeout
        while time.time() < deadline:
            try:
                if all(_cluster_ok(p) for p in self.live_ports()):
                    return
            except redis.RedisError:
                pass
            time.sleep(0.2)
        raise RuntimeError("the Redis Cluster did not reach cluster_state:ok in time")

    def live_ports(self) -> list[int]:
        return [p for p, proc in self.procs.items() if proc.poll() is None]

    def master_of(self, key: str) -> int:
        """The port of the master serving ``key``'s slot now."""
        client = redis.Redis(port=self.live_ports()[0])
        slot = int(client.execute_command("CLUSTER", "KEYSLOT", key))
        for start, end, master, *_replicas in client.execute_command("CLUSTER", "SLOTS"):
            if int(start) <= slot <= int(end):
                return int(master[1])
        raise RuntimeError(f"no master serves slot {slot}")

    def kill(self, port: int) -> None:
        proc = self.procs[port]
        proc.kill()
        proc.wait(timeout=10)

    def wait_failover(self, dead_port: int, key: str, timeout: float = 60.0) -> int:
        """Until a replica serves ``key``'s slot instead of ``dead_port``; returns the new master's port."""
        deadline = time.time() + timeout
        while time.time() < deadline:
            try:
                port = self.master_of(key)
                if port != dead_port and _is_master(port):
                    self.wait_ok(max(1.0, deadline - time.time()))
                    return port
            except redis.RedisError:
                pass
            time.sleep(0.2)
        raise RuntimeError(f"no replica took over from {dead_port} in time")

    def stop(self) -> None:
        stop_processes(self.procs, graceful=False)


def cluster_port() -> int:
    """A free loopback port whose cluster bus port (port + 10000, Redis's rule) is free too."""
    for _ in range(200):
        port = random.randint(20000, 45000)
        if all(_free(p) for p in (port, port + 10000)):
            return port
    raise RuntimeError("no free port pair for a cluster node")


def _free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
            return True
        except OSError:
            return False


def _wait_ping(port: int, timeout: float) -> None:
    client = redis.Redis(port=port)
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            if client.ping():
                return
        except redis.ConnectionError:
            time.sleep(0.05)
    raise RuntimeError(f"redis-server on {port} did not start in time")


def _cluster_ok(port: int) -> bool:
    info = redis.Redis(port=port, socket_timeout=2).execute_command("CLUSTER", "INFO")
    text = info.decode() if isinstance(info, bytes) else str(info)
    return "cluster_state:ok" in text and "cluster_slots_ok:16384" in text


def _is_master(port: int) -> bool:
    return redis.Redis(port=port, socket_timeout=2).info("replication").get("role") == "master"


def subscribers(client, channel: str) -> int:
    """How many clients subscribe to ``channel``: on a cluster, summed over its nodes (a subscriber is
    registered on the node it connected to; a message published anywhere reaches it)."""
    from redis.cluster import RedisCluster

    if isinstance(client, RedisCluster):
        return sum(int(node.redis_connection.pubsub_numsub(channel)[0][1]) for node in client.get_nodes())
    return int(client.pubsub_numsub(channel)[0][1])
