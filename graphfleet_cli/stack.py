"""Start and stop the embedded stack: Redis (when none is configured) and one worker process per
queue group (and the gateway, when available).

Every process the stack starts writes its Prometheus samples to one per-stack directory
(``PROMETHEUS_MULTIPROC_DIR`` = ``<data_dir>/metrics``, wiped at start), so the gateway's ``/metrics``
shows the counters of all of them; files of exited processes are folded (``shared.infra.metrics_multiproc``)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from shared.config import get_settings
from shared.infra.metrics import MULTIPROC_ENV, fold_dead, join_multiproc_dir, prepare_multiproc_dir
from shared.infra.queueing import WORKER_GROUPS
from shared.infra.redis_conn import EmbeddedRedis, connect, read_stack_info, stack_file, write_stack_info


class Stack:
    def __init__(self, data_dir: Path | None = None, worker_concurrency: int | None = None,
                 gateway_port: int | None = None, log_dir: Path | None = None,
                 redis_url: str | None = None, extra_env: dict | None = None,
                 groups: list[tuple[str, list[str], str]] | None = None, processes: int = 1):
        self.settings = get_settings()
        self.extra_env = dict(extra_env or {})
        self.groups = groups or WORKER_GROUPS
        self.processes = processes
        self.data_dir = Path(data_dir or self.settings.data_dir)
        self.worker_concurrency = worker_concurrency
        self.gateway_port = gateway_port
        self.log_dir = Path(log_dir or self.data_dir / "logs")
        self.redis: EmbeddedRedis | None = None
        self.redis_url = redis_url or self.settings.redis_url
        self.procs: list[tuple[str, subprocess.Popen]] = []
        self.gateway_url: str | None = None
        self.metrics_dir = self.data_dir / "metrics"

    def env(self) -> dict:
        env = dict(os.environ)
        env["GRAPHFLEET_REDIS_URL"] = self.redis_url or ""
        env["GRAPHFLEET_DATA_DIR"] = str(self.data_dir)
        env[MULTIPROC_ENV] = str(self.metrics_dir)
        env.setdefault("PYTHONUNBUFFERED", "1")
        env.update(self.extra_env)
        return env

    def start(self) -> Stack:
        """Start everything and wait until it is ready; on failure, stop whatever was started."""
        try:
            return self._start()
        except BaseException:
            self.stop()
            raise

    def _start(self) -> Stack:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.log_dir.mkdir(parents=True, exist_ok=True)
        prepare_multiproc_dir(self.metrics_dir)  # before any process of the stack starts
        if not self.redis_url:
            self.redis = EmbeddedRedis(self.data_dir / "redis").start()
            self.redis_url = self.redis.url
        for name, queues, pool in self.groups:
            for i in range(self.processes):
                label = name if self.processes == 1 else f"{name}{i}"
                self.procs.append((label, self._start_worker(label, queues, pool)))
        if self.gateway_port is not None:
            self._start_gateway()
        write_stack_info(self.data_dir, {"redis_url": self.redis_url, "pid": os.getpid(),
                                         "gateway_url": self.gateway_url, "metrics_dir": str(self.metrics_dir)})
        self.wait_ready()
        return self

    def _start_worker(self, name: str, queues: list[str], pool: str) -> subprocess.Popen:
        w = self.settings.workers
        conc = self.worker_concurrency or (w.llm_concurrency if pool == "threads" else 1)
        cmd = [sys.executable, "-m", "celery", "-A", "workers.celery_app", "worker", "-Q", ",".join(queues),
               "-P", pool, "-c", str(conc), "-n", f"{name}-{os.getpid()}@%h",
               "-l", os.environ.get("GRAPHFLEET_WORKER_LOG_LEVEL", "WARNING"),
               "--without-gossip", "--without-mingle", "--without-heartbeat"]
        log = open(self.log_dir / f"worker-{name}.log", "ab")  # noqa: SIM115 - owned by the child
        return subprocess.Popen(cmd, env=self.env(), stdout=log, stderr=subprocess.STDOUT, start_new_session=True)

    def _start_gateway(self) -> None:
        cmd = [sys.executable, "-m", "uvicorn", "api_gateway.app:create_app", "--factory", "--host", "127.0.0.1",
               "--port", str(self.gateway_port), "--log-level", "warning"]
        log = open(self.log_dir / "gateway.log", "ab")  # noqa: SIM115
        self.procs.append(("gateway", subprocess.Popen(cmd, env=self.env(), stdout=log, stderr=subprocess.STDOUT,
                                                       start_new_session=True)))
        self.gateway_url = f"http://127.0.0.1:{self.gateway_port}"

    def wait_ready(self, timeout: float = 60.0) -> None:
        """Wait until a consumer is registered on every queue (workers are consuming)."""
        client = connect(self.redis_url)
        from shared.infra.queueing import QUEUES, make_celery

        app = make_celery(self.settings.model_copy(update={"redis_url": self.redis_url}))
        deadline = time.time() + timeout
        while time.time() < deadline:
            for name, proc in self.procs:
                if proc.poll() is not None:
                    raise RuntimeError(f"{name} exited with {proc.returncode}; see {self.log_dir}")
            replies = app.control.inspect(timeout=1.0).active_queues() or {}
            consumed = {q["name"] for queues in replies.values() for q in queues}
            wanted = {q for _n, queues, _p in self.groups for q in queues} if self.groups else set(QUEUES)
            if wanted <= consumed:
                client.close()
                self._wait_gateway(deadline)
                return
            time.sleep(0.3)
        raise RuntimeError(f"workers not ready after {timeout}s; see logs in {self.log_dir}")

    def _wait_gateway(self, deadline: float) -> None:
        """Wait until the gateway (when started) answers ``/healthz``."""
        if not self.gateway_url:
            return
        import httpx

        gateway = dict(self.procs)["gateway"]
        while time.time() < deadline:
            if gateway.poll() is not None:
                raise RuntimeError(f"gateway exited with {gateway.returncode}; see {self.log_dir / 'gateway.log'}")
            try:
                if httpx.get(self.gateway_url + "/healthz", timeout=1.0).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        raise RuntimeError(f"gateway not answering at {self.gateway_url}; see {self.log_dir / 'gateway.log'}")

    def stop(self) -> None:
        for _name, proc in self.procs:
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
        deadline = time.time() + 20
        for _name, proc in self.procs:
            try:
                proc.wait(timeout=max(0.1, deadline - time.time()))
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        self.procs.clear()
        fold_dead(str(self.metrics_dir))  # processes killed without running their exit handlers
        if self.redis:
            self.redis.stop()
            self.redis = None
        info = read_stack_info(self.data_dir)
        if info and info.get("pid") == os.getpid():
            stack_file(self.data_dir).unlink(missing_ok=True)

    def __enter__(self) -> Stack:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def resolve_redis_url(data_dir: Path | None = None) -> str:
    settings = get_settings()
    if settings.redis_url:
        return settings.redis_url
    info = read_stack_info(Path(data_dir or settings.data_dir))
    if info and info.get("redis_url"):
        if info.get("metrics_dir"):  # jobs this CLI submits show up in the local stack's /metrics
            join_multiproc_dir(info["metrics_dir"])
        return info["redis_url"]
    raise SystemExit("no running stack: start one with `graphfleet up` or set GRAPHFLEET_REDIS_URL")
