"""CPU per message of kombu's Redis transport, with a new Redis client per command (kombu 5.7 as shipped) against
one client per channel (``shared.infra.kombu_client``), on an embedded Redis started here.

Each round sends ``--messages`` messages through a kombu ``SimpleQueue`` (a publish each), then receives and
acks them (``basic_get``: the fetch, ``QoS.append``, the ack): what a task's message costs its sender and its
worker around the task itself. Rounds alternate the two ways; printed per way: the median CPU of the thread per
message sent and per message received and acked, and how many ``redis.Redis`` clients were built per message.

    .venv/bin/python -m bench.kombu_client_cost [--messages 200] [--rounds 6] [--out FILE]
"""

from __future__ import annotations

import argparse
import statistics
import time
from contextlib import contextmanager
from pathlib import Path

import redis
from kombu import Connection
from kombu.transport import redis as kombu_redis

from bench.common import emit, machine, redis_server
from shared.infra.celery_patches import redis_channel_client as kombu_client

SHIPPED = kombu_redis.Channel.conn_or_acquire


@contextmanager
def built_clients():
    """Count the ``redis.Redis`` clients built meanwhile (``counted[0]``)."""
    counted, init = [0], redis.Redis.__init__

    def counting(self, *args, **kwargs):
        counted[0] += 1
        init(self, *args, **kwargs)

    redis.Redis.__init__ = counting
    try:
        yield counted
    finally:
        redis.Redis.__init__ = init


def one_round(url: str, messages: int, shared: bool) -> dict:
    if shared:
        kombu_client.install()
    else:
        kombu_redis.Channel.conn_or_acquire = SHIPPED
    with Connection(url) as conn, conn.SimpleQueue("kombu-cost") as queue:
        queue.put({"warm": 1})
        queue.get(timeout=5).ack()
        with built_clients() as built:
            started = time.thread_time()
            for i in range(messages):
                queue.put({"i": i, "job_id": "bench", "chunk_id": f"c{i}"})
            sent = time.thread_time() - started
            started = time.thread_time()
            for _ in range(messages):
                queue.get(timeout=5).ack()
            received = time.thread_time() - started
        return {"send_us": sent / messages * 1e6, "receive_ack_us": received / messages * 1e6,
                "clients_per_message": built[0] / messages}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--messages", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    emit({"bench": "machine", **machine()}, args.out)
    seen: dict[str, list[dict]] = {"client_per_command": [], "client_per_channel": []}
    try:
        with redis_server() as url:
            for _ in range(args.rounds):
                for way in seen:
                    seen[way].append(one_round(url, args.messages, shared=way == "client_per_channel"))
    finally:
        kombu_redis.Channel.conn_or_acquire = SHIPPED
    for way, rounds in seen.items():
        emit({"bench": "kombu_client_cost", "way": way, "messages": args.messages, "rounds": len(rounds),
              **{f"{k}_median": round(statistics.median(r[k] for r in rounds), 1) for k in rounds[0]}}, args.out)


if __name__ == "__main__":
    main()
