"""Redis commands and round trips per ingestion and per local query, by stack process group (Redis ``MONITOR``).

    .venv/bin/python -m bench.redis_round_trips [--queries 20] [--out bench/results/redis_round_trips.jsonl]

A stack (one process per group, the simulator at 0 ms) ingests the Christmas Carol under one tenant, unmeasured
(a running stack), then the same document under another tenant while ``MONITOR`` records every command Redis
runs, then ``--queries`` local questions one after another (``LocalClient``: submitted and waited for, as the
gateway does), recorded too. Each command is put to the process group that sent it (``client``: this one), the
client's port matched against the processes' own connections (the broker's commands, kombu's, are included: it
is the same Redis). What a Lua script runs is not counted, its EVAL is. Round trips: a MULTI ... EXEC block is
one; other commands of one connection that Redis ran back to back (no other client's between, less than
``GAP_US`` apart) are one pipeline. That is an approximation: two requests a client sent within ``GAP_US``
would count as one (a request costs redis-py ~80-130 us of CPU on this machine, so a client's separate
requests are further apart). ``other``: connections opened and closed between two samples of the processes'
connections (every 20 ms).
"""

from __future__ import annotations

import argparse
import threading
import time
from collections import Counter
from pathlib import Path

import psutil
import redis

from bench.common import SAMPLE, carol_question, emit, machine, redis_server, simulator, stack
from bench.cpu_timeline import PeriodicSampler
from bench.ingest_bench import stack_processes
from graphfleet_cli.local_client import LocalClient
from shared.domain.query.params import QueryParam

GAP_US = 40.0


class Recorder:
    """``MONITOR`` in a thread: (time, port, command name) of each client command while ``recording``."""

    def __init__(self, url: str):
        self.client, self.rows, self.recording = redis.Redis.from_url(url), [], False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        with self.client.monitor() as monitor:
            for cmd in monitor.listen():
                if self._stop.is_set():
                    return
                if self.recording and cmd.get("client_type") != "lua" and cmd.get("client_port"):
                    self.rows.append((cmd["time"], int(cmd["client_port"]), cmd["command"].split(" ", 1)[0].upper()))

    def __enter__(self) -> Recorder:
        self._thread.start()
        time.sleep(0.3)
        return self

    def take(self) -> list[tuple]:
        time.sleep(0.3)  # MONITOR's last lines
        rows, self.rows = self.rows, []
        return rows

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self.client.ping()
        self._thread.join(timeout=5)


def round_trips(rows: list[tuple]) -> dict[int, int]:
    """Round trips per client port (see the module docstring)."""
    trips: Counter = Counter()
    last: tuple[int, float] | None = None  # (port, time) of the previous command
    in_multi: set[int] = set()
    for t, port, name in rows:
        if port in in_multi:
            if name in ("EXEC", "DISCARD"):
                in_multi.discard(port)
        elif name == "MULTI":
            in_multi.add(port)
            trips[port] += 1
        elif not (last and last[0] == port and (t - last[1]) * 1e6 < GAP_US):
            trips[port] += 1
        last = (port, t)
    return dict(trips)


def by_group(rows: list[tuple], owner: dict[int, str]) -> dict[str, dict]:
    trips, out = round_trips(rows), {}
    for _, port, name in rows:
        group = out.setdefault(owner.get(port, "other"), {"commands": 0, "round_trips": 0, "by_command": Counter()})
        group["commands"] += 1
        group["by_command"][name] += 1
    for port, n in trips.items():
        out[owner.get(port, "other")]["round_trips"] += n
    return out


class Owners(PeriodicSampler):
    """Client port -> process group (``ingest``, ``query``... ``client``: this process) of the connections to Redis,
    sampled every ``interval`` while recording (a waiter's subscription connection lives for one wait)."""

    def __init__(self, st, redis_url: str, interval: float = 0.02):
        super().__init__(interval, "redis-owners")
        self.port, self.map = int(redis_url.rsplit(":", 1)[1].split("/")[0]), {}
        self.groups = [*stack_processes(st).items(), ("client", [psutil.Process()])]

    def sample(self) -> None:
        for label, procs in self.groups:
            for proc in procs:
                try:
                    conns = proc.net_connections(kind="tcp")
                except psutil.Error:
                    continue
                for conn in conns:
                    if conn.raddr and conn.raddr.port == self.port:
                        self.map[conn.laddr.port] = label.rstrip("0123456789")


def _per(groups: dict[str, dict], n: int) -> dict:
    return {g: {"commands": round(v["commands"] / n, 1), "round_trips": round(v["round_trips"] / n, 1),
                "top": {k: round(c / n, 1) for k, c in v["by_command"].most_common(12)}}
            for g, v in sorted(groups.items())}


def request_cpu_us(url: str, n: int = 3000) -> dict[str, float]:
    """What one request costs the client here: microseconds of this thread's CPU per GET, per two-command
    MULTI/EXEC pipeline and per EVAL, with the workers' client (``redis_conn.connect``), after a warm-up."""
    from shared.infra.redis_conn import connect

    client, out = connect(url), {}
    client.set("rt:k", "v")
    for name, call in (("get", lambda: client.get("rt:k")),
                       ("multi_exec_2", lambda: client.pipeline(transaction=True).hincrby("rt:h", "f", 1)
                        .expire("rt:h", 60).execute()),
                       ("eval", lambda: client.eval("return 1", 0))):
        for _ in range(n // 10):
            call()
        started = time.thread_time()
        for _ in range(n):
            call()
        out[name] = round((time.thread_time() - started) / n * 1e6, 1)
    client.delete("rt:k", "rt:h")
    return out


def run(queries: int, out: Path | None) -> list[dict]:
    records = []
    with simulator(latency_ms=0) as llm, redis_server() as url, stack(url, llm, 16) as st, Recorder(url) as rec:
        records.append({"bench": "redis_request_cpu", "cpu_us": request_cpu_us(url)})
        client = LocalClient(url)
        client.wait("warm", client.ingest_files("warm", [SAMPLE])["job_id"], timeout=1800)
        with Owners(st, url) as owner:
            rec.recording = True
            view = client.wait("rt", client.ingest_files("rt", [SAMPLE])["job_id"], timeout=1800)
            ingest_rows = rec.take()
            for i in range(queries):
                client.query("rt", QueryParam(mode="local", query=carol_question(i)))
            query_rows = rec.take()
            rec.recording = False
        records.append({"bench": "redis_round_trips", "phase": "ingest", "status": view["status"], "count": 1,
                        "per_item": _per(by_group(ingest_rows, owner.map), 1)})
        records.append({"bench": "redis_round_trips", "phase": "local_query", "count": queries,
                        "per_item": _per(by_group(query_rows, owner.map), queries)})
    for record in records:
        emit({**record, "gap_us": GAP_US, "machine": machine()}, out)
    return records


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--queries", type=int, default=20)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    for r in run(args.queries, args.out):
        if r["bench"] == "redis_request_cpu":
            print(f"client CPU per request, us: {r['cpu_us']}")
            continue
        print(f"\n{r['phase']} (per {'ingestion' if r['phase'] == 'ingest' else 'query'}):")
        for group, v in r["per_item"].items():
            print(f"  {group:<10} commands {v['commands']:>8}  round trips {v['round_trips']:>8}")


if __name__ == "__main__":
    main()
