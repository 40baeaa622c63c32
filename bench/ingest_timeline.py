"""One stack, several ingestions of the Christmas Carol: when each LLM call was sent and answered, and which process
used the CPU between the ingestion's milestones.

    .venv/bin/python -m bench.ingest_timeline [--latency 200] [--processes 2] [--ingestions 3] [--out FILE]

The stack first ingests the Carol once under another tenant, unmeasured (a running deployment's steady state, as
``bench.ingest_bench --warm-stack``), then ingests it ``--ingestions`` times, each under a tenant of its own. Per
ingestion it prints the milestones (seconds from the submission): the first extraction request sent, the last
gleaning answered, the last summary answered, the first report request, the last answer of the first report wave,
the last report request, ``finalize`` started and the end seen by the client; and between each two, the wall time
and the CPU seconds of every process (the worker groups, the simulator, Redis), sampled every 10 ms from the
threads' ``schedstat`` (``bench.cpu_timeline``). A thread that exited within a window (a report task's pool threads)
no longer counts, so a worker's CPU there is a lower bound. The calls are the job's usage records: each ends at
``ts`` and lasted ``latency_s`` as graphfleet's client measured it (``bench.llm_path``).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from bench.common import SAMPLE, emit, machine, redis_server, simulator, stack
from bench.cpu_timeline import CpuTimeline
from bench.ingest_bench import stack_processes
from bench.llm_path import job_calls
from graphfleet_cli.local_client import LocalClient
from graphfleet_cli.stack import parse_processes

SAMPLE_S = 0.01


def milestones(calls: list[tuple[float, float, str]], stage_times: dict, seconds: float) -> list[tuple[str, float]]:
    """(name, seconds from the submission) in order, from the calls ``(sent, answered, stage)`` (pure)."""
    def sent(stage):
        return [s for s, _e, st in calls if st == stage]

    def answered(stage):
        return [e for _s, e, st in calls if st == stage]

    wave1 = stage_times.get("report:wave1", float("inf"))
    wave0 = [e for s, e, st in calls if st == "report" and s < wave1]
    points = [("submitted", 0.0), ("extract sent", min(sent("extract"), default=None)),
              ("glean answered", max(answered("glean"), default=None)),
              ("summaries answered", max(answered("summarize"), default=None)),
              ("reports sent", min(sent("report"), default=None)), ("wave 0 answered", max(wave0, default=None)),
              ("last report sent", max(sent("report"), default=None)), ("finalize", stage_times.get("finalize")),
              ("end seen", seconds)]
    return [(name, round(at, 3)) for name, at in points if at is not None]


def windows(points: list[tuple[str, float]], samples: list[tuple[float, dict]]) -> list[dict]:
    """Per pair of consecutive milestones: its span and each process's CPU seconds in it, from the samples
    ``(seconds from the submission, {label: CPU seconds so far})`` nearest to its ends (pure)."""
    def at(t):
        return min(samples, key=lambda s: abs(s[0] - t))[1] if samples else {}

    out = []
    for (a, ta), (b, tb) in zip(points, points[1:], strict=False):
        before, after = at(ta), at(tb)
        # a thread that exited in the window takes its CPU along: what is left counts, never below 0
        cpu = {k: round(max(0.0, v - before.get(k, 0.0)), 3) for k, v in after.items()}
        out.append({"from": a, "to": b, "start": ta, "seconds": round(tb - ta, 3),
                    "cpu_total": round(sum(cpu.values()), 3), "cpu": {k: v for k, v in cpu.items() if v >= 0.005}})
    return out


def ingest_once(client: LocalClient, redis_url: str, procs: dict, tenant: str) -> dict:
    with CpuTimeline(procs, interval=SAMPLE_S, precise=True) as timeline:
        started_wall, started = time.time(), time.perf_counter()
        job = client.ingest_files(tenant, [SAMPLE])
        view = client.wait(tenant, job["job_id"], timeout=1800)
        seconds = time.perf_counter() - started
    records = job_calls(redis_url, tenant, [job["job_id"]], started_wall, time.time())[job["job_id"]]
    calls = sorted((round(r.ts - r.latency_s - started_wall, 3), round(r.ts - started_wall, 3), r.stage)
                   for r in records)
    samples = [(ts - started, cpu) for ts, cpu in timeline.samples]
    points = milestones(calls, view.get("stage_times") or {}, seconds)
    return {"bench": "ingest_timeline", "status": view["status"], "seconds": round(seconds, 3),
            "stage_times": view.get("stage_times"), "milestones": points, "windows": windows(points, samples),
            "calls": calls}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--latency", type=float, default=200.0)
    ap.add_argument("--processes", type=parse_processes, default=2, help="worker processes per queue group, or auto")
    ap.add_argument("--ingestions", type=int, default=3)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    emit({"bench": "machine", **machine()}, args.out)
    with simulator(latency_ms=args.latency) as llm, redis_server() as redis_url, \
            stack(redis_url, llm, None, args.processes) as st:
        client = LocalClient(redis_url)
        warm = client.ingest_files("warm", [SAMPLE])
        client.wait("warm", warm["job_id"], timeout=1800)
        procs = stack_processes(st, llm, redis_url)
        for i in range(args.ingestions):
            record = {"latency_ms": args.latency, "processes": args.processes, "run": i,
                      **ingest_once(client, redis_url, procs, f"timeline{i}")}
            if args.out is not None:  # the calls make a long line: the file only
                with args.out.open("a") as fh:
                    fh.write(json.dumps(record) + "\n")
            print(f"run {i}: {record['seconds']:.3f} s, stages {json.dumps(record['stage_times'])}")
            for w in record["windows"]:
                print(f"  {w['from']:>18} -> {w['to']:<18} {w['start']:6.3f} +{w['seconds']:.3f} s  "
                      f"CPU {w['cpu_total']:.3f} s {json.dumps(w['cpu'])}")


if __name__ == "__main__":
    main()
