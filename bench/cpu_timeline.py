"""When, during a run, one process held a whole core and when the machine's cores were all busy.

Total CPU seconds say how much work a run did, not whether it waited on the cores: a run can use half the
machine on average and still be bound by one process whose Python threads share one GIL (at most one core of
Python at a time) in bursts after each wave of LLM answers. ``CpuTimeline`` samples the CPU time of each
process every ``interval`` seconds in a daemon thread; ``summary`` gives, per process, the seconds in which it
used at least ``SATURATED`` of one core, and the seconds in which all processes together used at least
``SATURATED`` of every core. Only psutil's per-process counters are read (``/proc``), nothing is attached.
"""

from __future__ import annotations

import os
import threading
import time

SATURATED = 0.9  # share of a core (or of all cores) that counts as busy in a sample


def _scheduled_s(pid: int) -> float | None:
    """The CPU time the kernel scheduled the process's live threads for, in ns resolution (Linux ``schedstat``):
    ``cpu_times`` counts in clock ticks (10 ms), too coarse for one query. None where there is no ``schedstat``."""
    try:
        tasks = list(os.scandir(f"/proc/{pid}/task"))
    except OSError:
        return None
    total = 0
    for task in tasks:
        try:
            with open(f"{task.path}/schedstat") as f:
                total += int(f.read().split()[0])
        except OSError:  # a thread that exited meanwhile counts no more
            continue
    return total / 1e9


def _cpu_s(proc, precise: bool) -> float:
    scheduled = _scheduled_s(proc.pid) if precise else None
    if scheduled is not None:
        return scheduled
    times = proc.cpu_times()
    return times.user + times.system


def cpu_of(procs: dict[str, list], precise: bool = False) -> dict[str, float]:
    """label -> CPU seconds its processes have used so far; a process that exited counts no more. ``precise``:
    read the live threads' ``schedstat`` (ns) instead of clock ticks, for windows as short as one query (a
    thread that exited then counts no more either)."""
    out = {}
    for label, group in procs.items():
        total = 0.0
        for proc in group:
            try:
                total += _cpu_s(proc, precise)
            except Exception:  # noqa: BLE001 - psutil.NoSuchProcess and the like
                pass
        out[label] = total
    return out


class PeriodicSampler:
    """A daemon thread that calls ``sample()`` every ``interval`` seconds while the context is open, and once more
    on leaving it (``CpuTimeline``; ``bench.redis_round_trips.Owners``)."""

    def __init__(self, interval: float, name: str):
        self.interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def sample(self) -> None:
        raise NotImplementedError

    def _run(self) -> None:
        while not self._stop.is_set():
            self.sample()
            self._stop.wait(self.interval)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *_exc) -> None:
        self._stop.set()
        self._thread.join()
        self.sample()


class CpuTimeline(PeriodicSampler):
    def __init__(self, procs: dict[str, list], interval: float = 0.05, cores: int | None = None,
                 precise: bool = False):
        """``procs``: label -> psutil processes (a worker process and its pool children); ``precise``: read the
        threads' ``schedstat`` (``cpu_of``), for windows of a few tens of ms."""
        super().__init__(interval, "cpu-timeline")
        self.procs, self.precise = procs, precise
        self.cores = cores or os.cpu_count() or 1
        self.samples: list[tuple[float, dict[str, float]]] = []

    def sample(self) -> None:
        self.samples.append((time.perf_counter(), cpu_of(self.procs, self.precise)))

    def summary(self) -> dict:
        """{"one_core_s": {label: seconds it used ≥ SATURATED of a core}, "all_cores_s": seconds every core was
        ≥ SATURATED busy, "seconds": the span sampled}."""
        one: dict[str, float] = {label: 0.0 for label in self.procs}
        all_cores = 0.0
        for (t0, a), (t1, b) in zip(self.samples, self.samples[1:], strict=False):
            span = t1 - t0
            if span <= 0:
                continue
            used = {label: b[label] - a.get(label, 0.0) for label in b}
            for label, cpu in used.items():
                if cpu >= SATURATED * span:
                    one[label] += span
            if sum(used.values()) >= SATURATED * span * self.cores:
                all_cores += span
        seconds = self.samples[-1][0] - self.samples[0][0] if self.samples else 0.0
        return {"one_core_s": {k: round(v, 2) for k, v in one.items()}, "all_cores_s": round(all_cores, 2),
                "seconds": round(seconds, 2)}
