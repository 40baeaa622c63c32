"""The gateway's CPU per query submission against the number of the tenant's jobs in flight.

A gateway process (uvicorn, as ``graphfleet up`` starts it) on an embedded Redis, with no worker: every
``POST /v1/queries`` (no ``?wait``) is admitted, enqueued and stays queued, so the tenant's jobs in flight grow by
one per request. The tenant may hold ``--jobs`` of them (``max_concurrent_jobs``). Per step of ``--step``
submissions: the gateway process's CPU per submission (the kernel's per-thread ``schedstat``, in ns) and the
client's median wall time, with the jobs in flight when the step began.

    .venv/bin/python -m bench.submit_cost [--jobs 3000] [--step 500] [--http auto] [--out FILE]

``--http h11 --loop asyncio`` (or ``httptools``/``uvloop``) picks uvicorn's HTTP parser and event loop; ``auto``
is what a plain ``uvicorn`` command uses (the C ones when installed).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import httpx

from bench.common import ROOT, emit, machine, redis_server, wait_gateway
from bench.cpu_timeline import _scheduled_s
from shared.infra.redis_conn import free_port

ADMIN = "adm-bench-submit-cost"


def process_cpu_ms(pid: int) -> float:
    """CPU milliseconds the live threads of ``pid`` have run (``bench.cpu_timeline``'s ``schedstat`` read)."""
    return 1000 * (_scheduled_s(pid) or 0.0)


def _gateway(redis_url: str, port: int, http: str, loop: str) -> subprocess.Popen:
    env = {**os.environ, "GRAPHFLEET_REDIS_URL": redis_url, "GRAPHFLEET_ADMIN_KEY": ADMIN}
    cmd = [sys.executable, "-m", "uvicorn", "api_gateway.app:create_app", "--factory", "--host", "127.0.0.1",
           "--port", str(port), "--log-level", "warning", "--http", http, "--loop", loop]
    return subprocess.Popen(cmd, env=env, cwd=ROOT)


def _tenant_key(gw: httpx.Client, jobs: int) -> str:
    admin = {"X-API-Key": ADMIN}
    gw.post("/v1/tenants", json={"id": "sub", "limits": {"requests_per_minute": 1_000_000,
                                                         "max_concurrent_jobs": jobs}}, headers=admin)
    return gw.post("/v1/tenants/sub/keys", json={"name": "bench"}, headers=admin).raise_for_status().json()["api_key"]


def run(jobs: int, step: int, http: str, loop: str) -> list[dict]:
    records = []
    with redis_server() as redis_url:
        port = free_port()
        proc = _gateway(redis_url, port, http, loop)
        try:
            url = f"http://127.0.0.1:{port}"
            wait_gateway(url)
            with httpx.Client(base_url=url, timeout=60) as gw:
                headers = {"X-API-Key": _tenant_key(gw, jobs)}
                for start in range(0, jobs - step + 1, step):
                    cpu0, walls = process_cpu_ms(proc.pid), []
                    for i in range(step):
                        t0 = time.perf_counter()
                        r = gw.post("/v1/queries", headers=headers, json={"mode": "local", "query": f"q {start + i}"})
                        walls.append(1000 * (time.perf_counter() - t0))
                        if r.status_code != 202:
                            raise RuntimeError(f"submission {start + i}: {r.status_code} {r.text}")
                    records.append({"bench": "submit_cost", "http": http, "loop": loop, "in_flight": start,
                                    "submissions": step, "gateway_cpu_ms": round((process_cpu_ms(proc.pid) - cpu0)
                                                                                 / step, 3),
                                    "wall_ms_p50": round(statistics.median(walls), 2)})
        finally:
            proc.terminate()
            proc.wait()
    return records


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--jobs", type=int, default=3000, help="the tenant's jobs in flight at the end")
    ap.add_argument("--step", type=int, default=500, help="submissions per measured step")
    ap.add_argument("--http", default="auto", choices=("auto", "h11", "httptools"))
    ap.add_argument("--loop", default="auto", choices=("auto", "asyncio", "uvloop"))
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    print(f"{'in flight':>10}{'gateway CPU ms':>16}{'wall ms p50':>13}")
    for r in run(args.jobs, args.step, args.http, args.loop):
        emit({**r, "machine": machine()}, args.out)
        print(f"{r['in_flight']:>10}{r['gateway_cpu_ms']:>16.2f}{r['wall_ms_p50']:>13.2f}")


if __name__ == "__main__":
    main()
