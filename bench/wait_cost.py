"""What held requests cost a gateway: Redis connections, the gateway's CPU while they wait, and how soon they are
answered when their jobs end, against how many are held at once.

A gateway process (uvicorn, as ``graphfleet up`` starts it) on an embedded Redis, with no worker. Per round,
``N`` clients each send ``POST /v1/queries?wait=60`` and are held (their queries stay queued). Once all ``N`` are
held: the Redis connections in pubsub mode and in all (``CLIENT LIST``), the gateway's CPU per second over
``--idle`` seconds (the kernel's per-thread ``schedstat``), then every query is ended the way a worker ends one
(``JobStore.finish``: status and end message) and each answer's delay after its query's end is timed.

    .venv/bin/python -m bench.wait_cost [--held 50 200 800] [--idle 5] [--out FILE]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from pathlib import Path

import httpx

from bench.common import emit, machine, redis_server, wait_gateway
from bench.submit_cost import _gateway, _tenant_key, process_cpu_ms
from shared.infra.jobs import JobStore
from shared.infra.keys import Keys
from shared.infra.redis_conn import connect, free_port, to_str

TENANT = "sub"  # bench.submit_cost's tenant


def _connections(redis) -> tuple[int, int]:
    clients = redis.client_list()
    return sum(1 for c in clients if int(c.get("sub", 0)) > 0), len(clients)


async def _round(url: str, headers: dict, redis, held: int, idle_s: float, pid: int) -> dict:
    jobs, k = JobStore(redis, TENANT), Keys(TENANT)
    ended_at: dict[str, float] = {}
    delays: list[float] = []
    limits = httpx.Limits(max_connections=held + 10, max_keepalive_connections=held + 10)
    async with httpx.AsyncClient(base_url=url, timeout=120, limits=limits) as client:
        async def ask(i: int) -> None:
            r = await client.post("/v1/queries", params={"wait": 60}, headers=headers,
                                  json={"mode": "local", "query": f"held {held} {i}"})
            body = r.json()
            if r.status_code != 200 or body.get("status") != "succeeded":
                raise RuntimeError(f"held request {i}: {r.status_code} {r.text[:200]}")
            delays.append(1000 * (time.perf_counter() - ended_at[body["query_id"]]))

        baseline = _connections(redis)
        asking = [asyncio.create_task(ask(i)) for i in range(held)]
        deadline = time.monotonic() + 60
        while len(queued := [to_str(x) for x in redis.zrange(k.jobs(), 0, -1)
                             if jobs.status(to_str(x)) == "queued"]) < held:
            if time.monotonic() > deadline:
                raise RuntimeError(f"only {len(queued)} of {held} requests are held")
            await asyncio.sleep(0.05)
        await asyncio.sleep(1.0)  # every request past its subscription and first status read
        pubsub, total = _connections(redis)
        cpu0 = process_cpu_ms(pid)
        await asyncio.sleep(idle_s)
        cpu_per_s = (process_cpu_ms(pid) - cpu0) / idle_s
        for query_id in queued:
            ended_at[query_id] = time.perf_counter()
            jobs.finish(query_id, "succeeded", result='{"answer": "held", "answer_kind": "llm"}')
        await asyncio.gather(*asking)
    return {"bench": "wait_cost", "held": held, "redis_pubsub_connections": pubsub - baseline[0],
            "redis_connections": total - baseline[1], "gateway_cpu_ms_per_s": round(cpu_per_s, 2),
            "answer_after_end_ms_p50": round(statistics.median(delays), 2),
            "answer_after_end_ms_max": round(max(delays), 2)}


def run(held: list[int], idle_s: float) -> list[dict]:
    records = []
    with redis_server() as redis_url:
        port = free_port()
        proc = _gateway(redis_url, port, "auto", "auto")
        redis = connect(redis_url)
        try:
            url = f"http://127.0.0.1:{port}"
            wait_gateway(url)
            with httpx.Client(base_url=url, timeout=60) as gw:
                headers = {"X-API-Key": _tenant_key(gw, 100_000)}
            for n in held:
                records.append(asyncio.run(_round(url, headers, redis, n, idle_s, proc.pid)))
        finally:
            redis.close()
            proc.terminate()
            proc.wait()
    return records


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--held", type=int, nargs="+", default=[50, 200, 800], help="requests held at once, per round")
    ap.add_argument("--idle", type=float, default=5.0, help="seconds the gateway's CPU is read while they wait")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    print(f"{'held':>6}{'pubsub conns':>14}{'conns':>7}{'gw CPU ms/s':>13}{'answer p50 ms':>15}{'max ms':>9}")
    for r in run(args.held, args.idle):
        emit({**r, "machine": machine()}, args.out)
        print(f"{r['held']:>6}{r['redis_pubsub_connections']:>14}{r['redis_connections']:>7}"
              f"{r['gateway_cpu_ms_per_s']:>13.2f}{r['answer_after_end_ms_p50']:>15.2f}"
              f"{r['answer_after_end_ms_max']:>9.2f}")


if __name__ == "__main__":
    main()
