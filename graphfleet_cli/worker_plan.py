"""How many worker processes of each queue group a stack starts, and how many slots each
(``graphfleet_cli.stack`` describes the rule)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass

GIL_BOUND_GROUPS = {"ingest"}  # threads groups whose tasks also spend real CPU in Python (extraction parsing)
MAX_AUTO_CHILDREN = 16  # prefork children per CPU-bound group under "auto" (each is a full process)


@dataclass(frozen=True)
class GroupPlan:
    processes: int  # Celery worker processes of the group
    concurrency: int  # threads per process (threads pool) or pool children (prefork)


def available_cores() -> int:
    """The cores this process may run on (its CPU affinity, else the machine's count)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def parse_processes(value: str | int | None) -> int | str:
    """``"auto"`` or a positive process count (the ``--processes`` flag and ``workers.processes``)."""
    text = str(value if value is not None else "auto").strip().lower()
    if text == "auto":
        return "auto"
    if not text.isdigit() or int(text) < 1:
        raise ValueError(f"processes must be 'auto' or a positive integer, got {value!r}")
    return int(text)


def plan_workers(groups: Sequence[tuple[str, list[str], str]], processes: int | str, cores: int,
                 concurrency: int | None, llm_concurrency: int, cpu_concurrency: int) -> dict[str, GroupPlan]:
    """Pure: group name -> processes and slots per process.

    ``processes=N``: N processes of every group; threads pools get ``concurrency`` (else ``llm_concurrency``)
    threads, prefork pools ``min(concurrency or cpu_concurrency, cpu_concurrency)`` children (a merge batch waits
    on its LLM summaries: with one child, an ingestion's entity and relation batches ran one after the other),
    solo 1.
    ``"auto"``: prefork (CPU-bound) groups one process with a child per core (at most ``MAX_AUTO_CHILDREN``);
    threads (LLM-bound) groups ``concurrency`` (else ``llm_concurrency``) threads per process, and one process
    per core for the GIL-bound ``ingest`` group, one per four cores for the others."""
    cores = max(1, cores)
    threads = concurrency or llm_concurrency
    plan = {}
    for name, _queues, pool in groups:
        if pool == "solo":
            plan[name] = GroupPlan(1 if processes == "auto" else int(processes), 1)
        elif processes != "auto":
            slots = threads if pool == "threads" else max(1, min(concurrency or cpu_concurrency, cpu_concurrency))
            plan[name] = GroupPlan(int(processes), slots)
        elif pool == "threads":
            per = 1 if name in GIL_BOUND_GROUPS else 4
            plan[name] = GroupPlan(max(1, cores // per), threads)
        else:
            plan[name] = GroupPlan(1, min(cores, MAX_AUTO_CHILDREN))
    return plan
