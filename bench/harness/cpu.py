"""CPU seconds of a running stack's processes: each worker group (with its pool children), the simulator, Redis."""

from __future__ import annotations


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


def cpu_seconds(stack_obj, *urls: str) -> dict[str, float]:
    """CPU seconds used so far by each worker group (its processes summed), the simulator and Redis."""
    out: dict[str, float] = {}
    for label, group in stack_processes(stack_obj, *urls).items():
        key = label.rstrip("0123456789")
        out.setdefault(key, 0.0)
        for proc in group:
            try:
                times = proc.cpu_times()
                out[key] += times.user + times.system
            except Exception:  # noqa: BLE001 - psutil.NoSuchProcess and the like
                pass
    return out
