"""A killed worker's deliveries come back when their leases age out, whoever saw the death.

Every ingest worker process is SIGKILLed mid-extraction with a visibility timeout far above the test's bound
(``VISIBILITY_S``): kombu's own restore cannot bring the deliveries back in time, and the supervisor's reclaim
is switched off (as under Compose or Kubernetes, where no supervisor saw the exit). The restarted workers'
lease threads put back the messages whose lease nobody renewed (``workers/lease.py``), the job succeeds and
its graph equals an undisturbed run's. Real Redis, real worker processes, the LLM simulator over HTTP.
"""

from __future__ import annotations

import os
import signal

import pytest

from graphfleet_cli.local_client import LocalClient
from graphfleet_cli.stack import Stack
from shared.infra import queueing as q
from shared.infra.keys import BROKER_UNACKED, Keys
from shared.infra.store.redis_graph import GraphStore
from tests.conftest import SAMPLE, worker_env
from tests.integration.helpers import graph_snapshot
from tests.reliability.conftest import sim, wait_for

pytestmark = pytest.mark.integration

VISIBILITY_S = 900  # kombu's restore_visible would bring the messages back after this: far above BOUND_S
RENEW_S = 1.5  # the lease renewal interval: leases age out after 2 * 1.5 + 2 = 5 s
BOUND_S = 150  # the job's wait after the kill, well under VISIBILITY_S
GROUPS = [("ingest", ["chunker", "extractor", "merger", "reporter", "indexer"], "threads"),
          ("cluster", ["clusterer"], "solo")]


def _documents(tmp_path, count: int = 4) -> list:
    text = SAMPLE.read_text(encoding="utf-8-sig")[:48000]
    size = len(text) // count
    paths = []
    for i in range(count):
        path = tmp_path / f"part{i}.txt"
        path.write_text(text[i * size:(i + 1) * size], encoding="utf-8")
        paths.append(path)
    return paths


def _graph(client: LocalClient, tenant: str) -> dict:
    store = GraphStore(client.redis, tenant)
    return {**graph_snapshot(store), **store.stats()}


def test_every_ingest_worker_killed_and_no_supervisor_reclaim_the_job_completes(private_redis, tmp_path):
    """Without the lease threads' reclaim (``reclaim_expired`` in ``workers/lease.tend`` taken out) the killed
    workers' messages stay in ``unacked`` for ``VISIBILITY_S``, the watchdog rightly leaves the job alone while
    they are there, and ``client.wait`` raises TimeoutError after ``BOUND_S``."""
    docs = _documents(tmp_path)
    env = {"GRAPHFLEET_WORKERS__VISIBILITY_TIMEOUT_S": VISIBILITY_S, "GRAPHFLEET_WORKERS__LEASE_RENEW_INTERVAL_S":
           RENEW_S}
    with sim(latency_ms=100) as llm:
        stack = Stack(data_dir=tmp_path / "stack", redis_url=private_redis.url, worker_concurrency=4, groups=GROUPS,
                      processes=2, extra_env=worker_env(llm, **env)).start()
        stack.reclaim = lambda before: 0  # the supervisor restarts the workers but knows nothing of their messages
        try:
            client = LocalClient(private_redis.url)
            clean = client.wait("clean", client.ingest_files("clean", docs)["job_id"], timeout=600)
            assert clean["status"] == "succeeded", clean["failures"]
            expected = _graph(client, "clean")

            job_id = client.ingest_files("killed", docs)["job_id"]

            def mid_extraction():
                p = client.job("killed", job_id)["progress"]
                return p["chunks_total"] and p["chunks_total"] // 4 <= p["chunks_done"] < p["chunks_total"] * 3 // 4

            wait_for(mid_extraction, "extraction in flight", timeout=300)
            ingest = [proc for name, proc in stack.procs if name.startswith("ingest")]
            assert len(ingest) == 2
            for proc in ingest:  # every ingest worker process, as `kill -9 <pid>` does
                os.kill(proc.pid, signal.SIGKILL)
            for proc in ingest:
                proc.wait()
            orphaned = set(client.redis.hkeys(BROKER_UNACKED))
            assert orphaned, "the killed workers held no message: nothing to recover"

            view = client.wait("killed", job_id, timeout=BOUND_S)

            assert view["status"] == "succeeded", view["failures"]
            assert view["failures"] == []
            got = _graph(client, "killed")
            for key in ("documents", "chunks", "entities", "relations", "communities_by_level", "reports",
                        "communities"):
                assert got[key] == expected[key], key
            assert stack.failure is None and stack.supervisor.reclaimed == 0  # not the supervisor's doing
            assert not orphaned & set(client.redis.hkeys(BROKER_UNACKED)), "orphaned messages never restored"
            deliveries = [int(v) for v in client.redis.hgetall(Keys("killed").deliveries(job_id)).values()]
            assert max(deliveries) == 2 and max(deliveries) <= q.max_deliveries(stack.settings)  # redelivered once
        finally:
            stack.stop()
