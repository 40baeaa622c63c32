"""Start and stop the embedded stack: Redis (when none is configured) and the worker processes of every
queue group (and the gateway, when available).

How many processes per group, and how many slots each (:func:`plan_workers`): ``processes=N`` starts N
of every group; ``"auto"`` (``graphfleet up``'s default, ``GRAPHFLEET_WORKERS__PROCESSES``) sizes them
from the cores this process may run on. CPU-bound groups (``prefork``) get one process with a pool child
per core; LLM-bound groups (``threads``) get few processes with many threads each, since their tasks
mostly wait; the ``ingest`` group is the exception, one process per core: extraction parses every answer
under one process's GIL, which a wave of chunks in flight saturates, so a second process on a second core ends
the extraction sooner; the query groups one process per four cores.

Every process the stack starts writes its Prometheus samples to one per-stack directory
(``PROMETHEUS_MULTIPROC_DIR`` = ``<data_dir>/metrics``, wiped at start), so the gateway's ``/metrics`` shows
all of their counters; exited processes' files are folded (``shared.infra.observability.metrics_multiproc``).

Supervision: a daemon thread restarts any worker group or gateway process that exits while the stack is
up (after 1, 2, 4 ... up to 30 s), so a killed worker costs the others nothing; its unacked messages come
back once their leases have aged out (``workers/lease.py``, ~32 s: every live worker puts back the messages
whose lease nobody renewed, so this holds as well under Compose or Kubernetes, where no supervisor saw the
death; the supervisor also does it once for each exit it saw, ``shared.infra.messaging.celery_patches.redis_leases``),
not after the visibility timeout (120 s, the last resort; RabbitMQ redelivers at once by itself). A process that exits
``MAX_RESTARTS`` times within ``RESTART_WINDOW_S`` is given up: ``Stack.failure`` says why and
``graphfleet up`` stops with that message."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

from graphfleet_cli.stack_guard import DataDirLock, check_port_free, stack_alive
from graphfleet_cli.worker_plan import (  # noqa: F401 - the plan's names, also imported from here
    GIL_BOUND_GROUPS,
    MAX_AUTO_CHILDREN,
    GroupPlan,
    available_cores,
    parse_processes,
    plan_workers,
)
from shared.config import get_settings
from shared.infra.child_procs import own_session_kwargs
from shared.infra.messaging.celery_patches.redis_leases import reclaim_unrenewed
from shared.infra.messaging.queueing import WORKER_GROUPS, is_amqp, lease_expiry, make_celery, settings_for
from shared.infra.observability.metrics import MULTIPROC_ENV, fold_dead, join_multiproc_dir, prepare_multiproc_dir
from shared.infra.redis.conn import EmbeddedRedis, read_stack_info, stack_file, write_stack_info

MAX_RESTARTS = 5  # exits within RESTART_WINDOW_S after which a process is given up
RESTART_WINDOW_S = 300.0
BACKOFF_S = (1.0, 30.0)  # first delay before a restart, and the longest

GATEWAY_DRAIN_S = 20.0  # a stopping gateway's held requests are answered at once; past this it is killed
GATEWAY_KEEPALIVE_S = "75"  # idle client connections kept, seconds: above a proxy's idle timeout (docs/deployment.md)


def consumed_queues(app) -> set[str]:
    """The queues some worker consumes, as the workers answer ``inspect().active_queues()``; none on a broker
    connection error. kombu pools broker connections per broker URL for the whole process, so after a Redis
    restarted on the same address (a test's next server on a reused port) the first ask reads a closed socket;
    kombu drops that connection and the next ask connects again."""
    try:
        replies = app.control.inspect(timeout=1.0).active_queues() or {}
    except app.connection_for_write().connection_errors:
        return set()
    return {q["name"] for queues in replies.values() for q in queues}


class Supervisor:
    """Restarts the processes of a stack when they exit; gives a process up after repeated crashes.

    The processes it restarts are started from its thread, and the kernel ties their die-with-the-parent signal
    (``shared.infra.child_procs``) to that thread: so the thread, once halted, lives on until the stack has
    stopped every process (:meth:`release`), or the restarted ones would get the signal before the gateway stops."""

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
        for index, (_when, died_at, name) in enumerate(due):
            try:
                count = self.stack.reclaim(died_at)
            except Exception:
                self.reclaims.extend(due[index:])  # the broker unreachable: tried again at the next check
                raise
            if count:
                self.reclaimed += count
                self.say(f"graphfleet: put back {count} message(s) that {name} held when it exited")

    def _exited(self, name: str, code: int | None, now: float) -> None:
        if name != "gateway":  # a worker's unacked messages come back without waiting for the visibility timeout
            self.reclaims.append((now + lease_expiry(self.stack.settings), now, name))
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


class Stack:
    def __init__(self, data_dir: Path | None = None, worker_concurrency: int | None = None,
                 gateway_port: int | None = None, log_dir: Path | None = None,
                 redis_url: str | None = None, extra_env: dict | None = None,
                 groups: list[tuple[str, list[str], str]] | None = None, processes: int | str = 1):
        self.settings = get_settings()
        self.extra_env = dict(extra_env or {})
        self.groups = groups or WORKER_GROUPS
        self.processes = parse_processes(processes)
        w = self.settings.workers
        self.plan = plan_workers(self.groups, self.processes, available_cores(), worker_concurrency,
                                 w.llm_concurrency, w.cpu_concurrency)
        self.slots: dict[str, int] = {}  # worker label -> threads or pool children
        self.data_dir = Path(data_dir or self.settings.data_dir)
        self.worker_concurrency = worker_concurrency
        self.gateway_port = gateway_port
        self.log_dir = Path(log_dir or self.data_dir / "logs")
        self.redis: EmbeddedRedis | None = None
        self.redis_url = redis_url or self.settings.redis_url
        # the broker: GRAPHFLEET_BROKER_URL in extra_env, else the configured one for this state (settings_for)
        self.broker_url = self.extra_env.get("GRAPHFLEET_BROKER_URL") or (
            settings_for(self.settings, self.redis_url).broker_url if self.redis_url else None)
        self.procs: list[tuple[str, subprocess.Popen]] = []
        self.specs: dict[str, tuple[list[str], str]] = {}  # worker label -> (queues, pool), for restarts
        self.failure: str | None = None  # set when the supervisor gave a process up
        self.supervisor: Supervisor | None = None
        self.gateway_url: str | None = None
        self.metrics_dir = self.data_dir / "metrics"
        self.lock = DataDirLock(self.data_dir)
        self._celery = None

    def celery(self):
        """A Celery app on this stack's broker (built once)."""
        if self._celery is None:
            self._celery = make_celery(settings_for(self.settings, self.redis_url, self.broker_url))
        return self._celery

    def reclaim(self, before: float) -> int:
        """Put back on their queues the messages no live worker has renewed since ``before`` (a Redis or Sentinel
        broker; RabbitMQ redelivers a closed connection's messages by itself)."""
        app = self.celery()
        if is_amqp(app.conf.broker_url):
            return 0
        with app.connection_for_write() as connection:
            return reclaim_unrenewed(connection, before)

    def env(self) -> dict:
        env = dict(os.environ)
        env["GRAPHFLEET_REDIS_URL"] = self.redis_url or ""
        env["GRAPHFLEET_BROKER_URL"] = self.broker_url or ""  # "" = the state's own Redis
        env.pop("GRAPHFLEET_STATE_REDIS_URL", None)  # applied: GRAPHFLEET_REDIS_URL is the state here
        env["GRAPHFLEET_DATA_DIR"] = str(self.data_dir)
        env[MULTIPROC_ENV] = str(self.metrics_dir)
        env.setdefault("PYTHONUNBUFFERED", "1")
        env.setdefault("REMAP_SIGTERM", "SIGQUIT")  # SIGTERM: soft shutdown, then requeue (docs/reliability.md)
        env.update(self.extra_env)
        return env

    def start(self) -> Stack:
        """Start everything and wait until it is ready; on failure, stop whatever was started. Before anything
        starts: the data directory's lock (``StackStartRefused`` when another stack holds it) and a free gateway
        port (``StackStartRefused`` too), so a refused stack touches nothing of the running one."""
        self.lock.acquire()
        try:
            if self.gateway_port is not None:
                check_port_free(self.gateway_port)
        except BaseException:
            self.lock.release()
            raise
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
            count = self.plan[name].processes
            for i in range(count):
                label = name if count == 1 else f"{name}{i}"
                self.specs[label] = (queues, pool)
                self.slots[label] = self.plan[name].concurrency
                self.procs.append((label, self._start_worker(label, queues, pool)))
        if self.gateway_port is not None:
            self._start_gateway()
        write_stack_info(self.data_dir, {"redis_url": self.redis_url, "broker_url": self.broker_url,
                                         "pid": os.getpid(),
                                         "gateway_url": self.gateway_url, "metrics_dir": str(self.metrics_dir)})
        self.lock.record(self.gateway_url)
        self.wait_ready()
        self.supervisor = Supervisor(self).start()
        return self

    def respawn(self, name: str) -> subprocess.Popen:
        """Start the process ``name`` again (a worker group's, or the gateway)."""
        if name == "gateway":
            return self._gateway_proc()
        queues, pool = self.specs[name]
        return self._start_worker(name, queues, pool)

    def _start_worker(self, name: str, queues: list[str], pool: str) -> subprocess.Popen:
        conc = self.slots.get(name)
        if conc is None:  # a worker started by hand (tests): the fixed rule of ``processes=1``
            w = self.settings.workers
            conc = plan_workers([(name, queues, pool)], 1, 1, self.worker_concurrency, w.llm_concurrency,
                                w.cpu_concurrency)[name].concurrency
        cmd = [sys.executable, "-m", "celery", "-A", "workers.celery_app", "worker", "-Q", ",".join(queues),
               "-P", pool, "-c", str(conc), "-n", f"{name}-{os.getpid()}@%h",
               "-l", self.settings.worker_log_level,
               "--without-gossip", "--without-mingle", "--without-heartbeat"]
        log = open(self.log_dir / f"worker-{name}.log", "ab")  # noqa: SIM115 - owned by the child
        return subprocess.Popen(cmd, env=self.env(), stdout=log, stderr=subprocess.STDOUT, **own_session_kwargs())

    def _start_gateway(self) -> None:
        self.procs.append(("gateway", self._gateway_proc()))
        self.gateway_url = f"http://127.0.0.1:{self.gateway_port}"

    def _gateway_proc(self) -> subprocess.Popen:
        cmd = [sys.executable, "-m", "uvicorn", "api_gateway.app:create_app", "--factory", "--host", "127.0.0.1",
               "--port", str(self.gateway_port), "--log-level", "warning", "--timeout-keep-alive", GATEWAY_KEEPALIVE_S]
        log = open(self.log_dir / "gateway.log", "ab")  # noqa: SIM115
        return subprocess.Popen(cmd, env=self.env(), stdout=log, stderr=subprocess.STDOUT, **own_session_kwargs())

    def wait_ready(self, timeout: float = 60.0) -> None:
        """Wait until a consumer is registered on every queue (workers are consuming)."""
        from shared.infra.messaging.queueing import QUEUES

        wanted = {q for _n, queues, _p in self.groups for q in queues} if self.groups else set(QUEUES)
        deadline = time.time() + timeout
        while time.time() < deadline:
            for name, proc in self.procs:
                if proc.poll() is not None:
                    raise RuntimeError(f"{name} exited with {proc.returncode}; see {self.log_dir}")
            if wanted <= consumed_queues(self.celery()):
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
        """Stop in order: the gateway first (held requests answered while Redis still serves), then the workers
        (running tasks get their soft shutdown and are requeued), Redis last; then drop the data directory's lock."""
        if self.supervisor is not None:
            self.supervisor.halt()  # restarts nothing more; its thread lives until the processes are gone
        gateway = [p for n, p in self.procs if n == "gateway"]
        self._terminate(gateway, GATEWAY_DRAIN_S)
        workers = [p for n, p in self.procs if n != "gateway"]
        self._terminate(workers, self.settings.workers.soft_shutdown_timeout_s + 20)  # running tasks: requeued
        self.procs.clear()
        if self.supervisor is not None:
            self.supervisor.release()
            self.supervisor = None
        fold_dead(str(self.metrics_dir))  # processes killed without running their exit handlers
        if self._celery is not None:
            self._celery.close()  # its broker connections
            self._celery = None
        if self.redis:
            self.redis.stop()
            self.redis = None
        info = read_stack_info(self.data_dir)
        if info and info.get("pid") == os.getpid():
            stack_file(self.data_dir).unlink(missing_ok=True)
        self.lock.release()

    @staticmethod
    def _terminate(procs: list[subprocess.Popen], grace_s: float) -> None:
        """SIGTERM to the process groups of ``procs``, and SIGKILL to those still running after ``grace_s``."""
        for proc in procs:
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
        deadline = time.time() + grace_s
        for proc in procs:
            try:
                proc.wait(timeout=max(0.1, deadline - time.time()))
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()

    def __enter__(self) -> Stack:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def resolve_redis_url(data_dir: Path | None = None) -> str:
    settings = get_settings()
    if settings.redis_url:
        return settings.redis_url
    data_dir = Path(data_dir or settings.data_dir)
    info = read_stack_info(data_dir)
    if info and info.get("redis_url") and stack_alive(data_dir):
        if info.get("metrics_dir"):  # jobs this CLI submits show up in the local stack's /metrics
            join_multiproc_dir(info["metrics_dir"])
        return info["redis_url"]
    from graphfleet_cli.errors import CliError

    raise CliError("no_stack", "no running stack: start one with `graphfleet up` or set GRAPHFLEET_REDIS_URL")
