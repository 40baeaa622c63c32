"""What a pause costs this machine, with no graphfleet in it: a fixed piece of CPU work after each pause.

The first-query rows of the issue 21 table compare a query that comes after a pause (a fresh stack's first, or
the first after an ingestion) with warm ones asked back to back, and ``bench.gateway_latency --idle`` times
queries on a warm stack after ``IDLE_S`` with none. On a virtual machine the same work can take longer right
after a pause for reasons outside the program (the host may have to schedule the vCPU again, others may have used
its caches, its clock may ramp up; this bench does not tell them apart). It measures the effect alone: one
process, no I/O, the same ~5 ms of Python work (JSON decoding and SHA-1 of 3,000 short records, the kind of
work a task does), first ``--warm`` times back to back, then ``--repeat`` times after each pause of
``--pauses`` seconds. Printed per pause: the work's milliseconds (median, max) and the median over the warm
median.

    .venv/bin/python -m bench.idle_cpu [--pauses 0 0.5 1 2 4 6 8] [--repeat 5] [--out FILE]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import statistics
import time
from pathlib import Path

from bench.common import emit, machine

RECORDS = [json.dumps({"id": i, "name": f"entity {i}", "description": "x" * 50}) for i in range(3000)]


def work() -> float:
    """Milliseconds of one fixed piece of CPU work."""
    started = time.perf_counter()
    total = 0
    for record in RECORDS:
        total += len(json.loads(record)["description"])
        hashlib.sha1(record.encode()).hexdigest()
    assert total == 50 * len(RECORDS)
    return 1000 * (time.perf_counter() - started)


def run(pauses: list[float], repeat: int, warm: int, out: Path | None) -> list[dict]:
    warm_ms = [work() for _ in range(warm)]
    base = statistics.median(warm_ms)
    records = []
    for pause in pauses:
        times = []
        for _ in range(repeat):
            time.sleep(pause)
            times.append(work())
        record = {"bench": "idle_cpu", "pause_s": pause, "runs": repeat, "ms": [round(t, 2) for t in times],
                  "ms_median": round(statistics.median(times), 2), "ms_max": round(max(times), 2),
                  "warm_ms_median": round(base, 2), "over_warm": round(statistics.median(times) / base, 2),
                  "machine": machine()}
        emit(record, out)
        records.append(record)
    return records


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pauses", type=float, nargs="+", default=[0, 0.5, 1, 2, 4, 6, 8])
    ap.add_argument("--repeat", type=int, default=5, help="timed runs after each pause")
    ap.add_argument("--warm", type=int, default=50, help="back-to-back runs first, the reference")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    run(args.pauses, args.repeat, args.warm, args.out)


if __name__ == "__main__":
    main()
