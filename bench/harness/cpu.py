"""CPU seconds of a running stack's processes: each worker group (with its pool children), the simulator, Redis."""

from __future__ import annotations

import os


def _scheduled_s(pid: int) -> float | None:
    """CPU time of the process's live threads from Linux ``schedstat`` (ns; ``cpu_times`` counts 10 ms ticks,
    too coarse for one query); None where there is none."""
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


def cpu_of(procs: dict[str, list], precise: bool = False) -> dict[str, float]:
    """label -> CPU seconds its processes have used so far; ``precise``: ``schedstat`` instead of clock ticks."""
    out = {}
    for label, group in procs.items():
        out[label] = 0.0
        for proc in group:
            try:
                scheduled = _scheduled_s(proc.pid) if precise else None
                if scheduled is None:
                    times = proc.cpu_times()
                    scheduled = times.user + times.system
                out[label] += scheduled
            except Exception:  # noqa: BLE001 - psutil.NoSuchProcess and the like
                pass
    return out


def stack_processes(stack_obj, *urls: str) -> dict[str, list]:
    """label -> psutil processes: each worker process with its pool children (``ingest1``...), and those serving
    ``urls`` (``simulator``, ``redis``). Empty without psutil."""
    try:
        import psutil
    except ImportError:
        return {}
    out: dict[str, list] = {}
    for name, popen in stack_obj.procs:
        try:
            parent = psutil.Process(popen.pid)
            out[name] = [parent, *parent.children(recursive=True)]
        except psutil.Error:
            pass
    for label, url in zip(("simulator", "redis"), urls, strict=False):
        port = url.rsplit(":", 1)[-1].split("/")[0]
        out[label] = [p for p in psutil.process_iter(["cmdline"])
                      if any(part == port or part.endswith(f":{port}") for part in p.info["cmdline"] or ())]
    return out


def group_cpu(procs: dict[str, list], precise: bool = False) -> dict[str, float]:
    """CPU seconds used so far by each worker group (its processes summed), the simulator and Redis."""
    out: dict[str, float] = {}
    for label, group in cpu_of(procs, precise).items():
        key = label.rstrip("0123456789")
        out[key] = out.get(key, 0.0) + group
    return out


def cpu_seconds(stack_obj, *urls: str, precise: bool = False) -> dict[str, float]:
    return group_cpu(stack_processes(stack_obj, *urls), precise)

