"""CPU per message of a fan-out's sends against a Redis broker (an embedded one, started here).

Three ways to send ``--messages`` ExtractChunk messages, alternated for ``--rounds`` rounds of ``--repeat``
fan-outs each: ``celery`` (Celery's ``send_task`` as graphfleet called it before: its ``saferepr`` of the
arguments, one publish per message), ``send`` (``shared.infra.messages.send`` per message: the reprs given) and
``send_all`` (one kombu publish batch: one pipeline). Prints the median CPU of the sending thread per message.

    .venv/bin/python -m bench.send_cost [--messages 42] [--repeat 20] [--rounds 5] [--out FILE]
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

from bench.common import emit, redis_server
from shared.config import Settings
from shared.infra import queueing as q
from shared.infra.messages import ExtractChunk, send, send_all
from shared.infra.warmup import warm_sender


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--messages", type=int, default=42)
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    with redis_server() as url:
        celery = q.make_celery(Settings(redis_url=url))
        warm_sender(celery)
        fan_out = [ExtractChunk("bench", "job", f"c{i}") for i in range(args.messages)]
        ways = {
            "celery": lambda: [celery.send_task(m.TASK, kwargs=m.kwargs()) for m in fan_out],
            "send": lambda: [send(celery, m) for m in fan_out],
            "send_all": lambda: send_all(celery, fan_out),
        }
        seen: dict[str, list[float]] = {name: [] for name in ways}
        for _ in range(args.rounds):
            for name, way in ways.items():
                started = time.thread_time()
                for _ in range(args.repeat):
                    way()
                seen[name].append((time.thread_time() - started) / args.repeat / args.messages * 1000)
        for name, per_message in seen.items():
            emit({"bench": "send_cost", "way": name, "messages": args.messages,
                  "cpu_ms_per_message": round(statistics.median(per_message), 3),
                  "rounds": [round(x, 3) for x in per_message]}, args.out)
        celery.close()


if __name__ == "__main__":
    main()
