"""Count the messages each process sends and the CPU its sends use (``bench/results/send_batch_ab.jsonl``).

Put this directory on ``PYTHONPATH`` with ``GF_SENDCOUNT`` naming a file: every Python process started then
(the bench, each worker and pool child) wraps ``Celery.send_task`` and kombu's Redis publish-batch flush with
a thread-CPU counter and appends one JSON line per process that sent anything when it exits (a Celery worker
at its shutdown signal). A measuring aid only: nothing in graphfleet imports it.

    GF_SENDCOUNT=/tmp/sends.jsonl PYTHONPATH=$PWD/bench/send_count_hook .venv/bin/python -m bench.ingest_bench \
        --latency 200 --repeat 1 --processes 1 --concurrency 0
"""

from __future__ import annotations

import os

if os.environ.get("GF_SENDCOUNT"):
    import atexit
    import json
    import sys
    import threading
    import time

    _stats = {"send_task": 0, "send_cpu": 0.0, "flushes": 0, "flush_cpu": 0.0}
    _lock = threading.Lock()

    def _counted(fn, count: str, cpu: str):
        def wrapper(*args, **kwargs):
            started = time.thread_time()
            try:
                return fn(*args, **kwargs)
            finally:
                with _lock:
                    _stats[count] += 1
                    _stats[cpu] += time.thread_time() - started

        return wrapper

    def _dump(*_args, **_kwargs) -> None:
        if _stats["send_task"]:
            with open(os.environ["GF_SENDCOUNT"], "a", encoding="utf-8") as out:
                out.write(json.dumps({"pid": os.getpid(), "argv": " ".join(sys.argv)[-80:], **_stats}) + "\n")
            _stats["send_task"] = 0

    try:
        from celery.app import base
        from celery.signals import worker_process_shutdown, worker_shutdown
        from kombu.transport import redis as kombu_redis

        base.Celery.send_task = _counted(base.Celery.send_task, "send_task", "send_cpu")
        kombu_redis.PublishBatch.flush = _counted(kombu_redis.PublishBatch.flush, "flushes", "flush_cpu")
        atexit.register(_dump)
        worker_shutdown.connect(_dump, weak=False)
        worker_process_shutdown.connect(_dump, weak=False)
    except Exception as exc:  # noqa: BLE001 - a measuring aid: say so and let the process run
        print(f"send_count_hook not installed: {exc}", file=sys.stderr)
