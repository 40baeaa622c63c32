"""``bench.ingest_bench``'s per-task wait in the queue: read from the stack's multiprocess metrics directory, as
the workers' processes wrote it, and turned into per-task counts and means between two readings."""

from __future__ import annotations

from bench.ingest_bench import queue_wait_ms, queue_waits
from shared.infra.metrics import prepare_multiproc_dir
from shared.infra.queueing import EXTRACT, QUERY, ROUTES
from tests.unit.test_metrics import base_env, run_py

OBSERVE = f"""
from shared.infra import metrics as m
for seconds in (0.03, 0.05):
    m.observe_task_queue_wait("{ROUTES[EXTRACT]}", "{EXTRACT}", seconds)
m.observe_task_queue_wait("{ROUTES[QUERY]}", "{QUERY}", 0.004)
"""


def test_waits_written_by_worker_processes_are_read_per_task_and_differenced(tmp_path):
    mp_dir = prepare_multiproc_dir(tmp_path / "prom")
    assert queue_waits(mp_dir) == {}
    run_py(OBSERVE, base_env(mp_dir))  # one worker process: two extractions, one query
    before = queue_waits(mp_dir)
    assert before["extract_chunk"][0] == 2 and abs(before["extract_chunk"][1] - 0.08) < 1e-9
    run_py(OBSERVE, base_env(mp_dir))  # another process: two more extractions, one more query
    after = queue_waits(mp_dir)
    assert queue_wait_ms(before, after) == {"extract_chunk": {"tasks": 2, "mean_ms": 40.0},
                                            "query": {"tasks": 1, "mean_ms": 4.0}}
    assert queue_wait_ms(after, after) == {}  # nothing started in between
