"""Lease renewal (``workers/lease.py``): a task that runs longer than the visibility timeout is not
redelivered while its worker lives, which is what lets the visibility timeout be short.

Real Redis, real worker processes, the LLM simulator behind the holding gate of ``test_redelivery``.
"""

from __future__ import annotations

import time

import pytest

from graphfleet_cli.local_client import LocalClient
from graphfleet_cli.stack import Stack
from shared.infra.messaging import queueing as q
from shared.infra.messaging.celery_patches.redis_leases import renew_leases as renew
from shared.infra.redis.conn import connect
from shared.infra.redis.keys import BROKER_UNACKED_INDEX, Keys
from tests.conftest import worker_env
from tests.reliability.test_redelivery import Gate, gate  # noqa: F401 - the module-scoped gate fixture

pytestmark = pytest.mark.integration

VISIBILITY_S = 6
MARKER = "Jkqz-long-task-marker-3307"


def test_renew_moves_only_the_leases_still_unacked(private_redis):
    redis_client = connect(private_redis.url)
    redis_client.zadd(BROKER_UNACKED_INDEX, {"held": 100.0, "other": 100.0})
    assert renew(redis_client, ["held", "acked-meanwhile"], now=500.0) == 1
    assert dict(redis_client.zrange(BROKER_UNACKED_INDEX, 0, -1, withscores=True)) == {b"held": 500.0,
                                                                                       b"other": 100.0}
    assert renew(redis_client, []) == 0
    redis_client.close()


def test_task_longer_than_the_visibility_timeout_is_not_redelivered(gate: Gate, tmp_path):  # noqa: F811
    """An extraction held at the LLM for over three visibility timeouts runs once. Without the lease
    renewal (``lease.install`` removed from ``workers/celery_app.py``) kombu restores its message after
    ``VISIBILITY_S`` and the other worker slot runs it again: a second arrival at the gate, and 2 deliveries."""
    groups = [("ingest", ["chunker", "extractor", "merger", "reporter", "indexer"], "threads"),
              ("cluster", ["clusterer"], "prefork")]
    stack = Stack(data_dir=tmp_path / "stack", worker_concurrency=4, groups=groups,
                  extra_env=worker_env(gate.url, GRAPHFLEET_EXTRACTION__MAX_GLEANING=0,
                                       GRAPHFLEET_WORKERS__VISIBILITY_TIMEOUT_S=VISIBILITY_S)).start()
    gate.hold, gate.released = MARKER, False
    try:
        client = LocalClient(stack.redis_url)
        doc = tmp_path / "long.txt"
        doc.write_text(f"Scrooge kept the ledger of {MARKER} in the counting-house.", encoding="utf-8")
        job_id = client.ingest_files("lease", [doc])["job_id"]
        assert gate.arrived.acquire(timeout=120), "the chunk never reached the LLM"
        held_since = time.time()
        assert not gate.arrived.acquire(timeout=3.5 * VISIBILITY_S), "redelivered while its worker was running it"
        [(_tag, score)] = client.redis.zrange(BROKER_UNACKED_INDEX, 0, -1, withscores=True)
        assert score > held_since  # the lease was renewed while the task ran
        gate.released = True
        view = client.wait("lease", job_id, timeout=300)
        deliveries = {k.decode(): int(v) for k, v in client.redis.hgetall(Keys("lease").deliveries(job_id)).items()}
    finally:
        gate.hold, gate.released = None, True
        stack.stop()
    assert view["status"] == "succeeded", view
    assert [v for k, v in deliveries.items() if k.startswith(q.EXTRACT)] == [1], deliveries
