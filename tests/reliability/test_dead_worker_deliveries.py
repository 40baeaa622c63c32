"""A killed worker's deliveries come back when their leases age out, whoever saw the death.

Every ingest worker process is SIGKILLed mid-extraction with a visibility timeout far above the test's bound
(``VISIBILITY_S``): kombu's own restore cannot bring the deliveries back in time, and the supervisor's reclaim
is switched off (as under Compose or Kubernetes, where no supervisor saw the exit). The restarted workers'
lease threads put back the messages whose lease nobody renewed (``workers/lease.py``), the job succeeds and
its graph equals an undisturbed run's. Real Redis, real worker processes, the LLM simulator over HTTP.

A message a killed worker had popped from its queue (kombu's ``BRPOP``) but not yet written to ``unacked`` is
in neither: the job watchdog brings that one back (``workers.lost_timeout_s`` on a Redis broker). It cannot
stand in for the lease put-back: it leaves alone a job with messages in ``unacked``, as the orphans are here
until a lease thread puts them back. On a timeout the failure says what the job, the broker and the workers
showed (``_post_mortem``).
"""

from __future__ import annotations

import json
import os
import signal
import time

import pytest

from graphfleet_cli.local_client import LocalClient
from graphfleet_cli.stack import Stack
from shared.infra.messaging import queueing as q
from shared.infra.redis.conn import to_str
from shared.infra.redis.keys import BROKER_UNACKED, BROKER_UNACKED_INDEX, Keys, broker_queue_keys, watchdog_key
from tests.conftest import worker_env
from tests.reliability.conftest import graph_and_stats, sample_parts, sim, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.own_servers]  # its own Redis: the layout changes nothing

VISIBILITY_S = 900  # kombu's restore_visible would bring the messages back after this: far above BOUND_S
RENEW_S = 1.5  # the lease renewal interval: leases age out after 2 * 1.5 + 2 = 5 s
BOUND_S = 150  # the job's wait after the kill, well under VISIBILITY_S
GROUPS = [("ingest", ["chunker", "extractor", "merger", "reporter", "indexer"], "threads"),
          ("cluster", ["clusterer"], "solo")]


def _message_summary(raw: bytes) -> str:
    """The task name and the job-scoped kwargs of a raw kombu message (as kept in a queue or ``unacked``)."""
    try:
        body = json.loads(raw)
        if isinstance(body, list):  # the unacked hash keeps [message, exchange, routing_key]
            body = body[0]
        headers = body.get("headers", {})
        return f"{headers.get('task')} {headers.get('kwargsrepr') or headers.get('argsrepr')}"[:240]
    except (ValueError, AttributeError, TypeError):
        return repr(raw[:160])


def _post_mortem(client: LocalClient, stack: Stack, job_id: str, killed_at: float) -> str:
    """What the job, the broker and the workers show when the job did not finish in time: enough to say which
    message went missing, where it was last seen, and who (the lease threads, the watchdog) did what."""
    r, now = client.redis, time.time()
    view = client.job("killed", job_id) or {}
    lines = [f"{now - killed_at:.0f} s after the kill: status={view.get('status')} stage={view.get('stage')} "
             f"resumes={view.get('resumes')} progress={view.get('progress')} failures={view.get('failures')}",
             f"deliveries counted: {r.hgetall(Keys('killed').deliveries(job_id))}",
             f"watchdog entries: {r.hgetall(watchdog_key())}"]
    for name in [*q.QUEUES, "default"]:
        for key in broker_queue_keys(name):
            for raw in r.lrange(key, 0, -1):
                lines.append(f"queued in {key!r}: {_message_summary(raw)}")
    index = {to_str(k): v for k, v in r.zrange(BROKER_UNACKED_INDEX, 0, -1, withscores=True)}
    unacked = {to_str(tag): raw for tag, raw in r.hgetall(BROKER_UNACKED).items()}
    for tag, raw in unacked.items():
        lease = index.get(tag)
        age = f"{now - lease:.0f} s" if lease is not None else "none"
        lines.append(f"unacked {tag} (lease age {age}): {_message_summary(raw)}")
    lines.append(f"unacked_index tags not in unacked: {sorted(set(index) - set(unacked))}")
    for path in sorted(stack.log_dir.glob("worker-*.log")):
        for line in path.read_text(errors="replace").splitlines():
            if any(w in line for w in ("put back", "resum", "stalled", "ERROR", "Traceback", "redeliver")):
                lines.append(f"{path.name}: {line[:300]}")
    return "\n".join(lines)


def test_every_ingest_worker_killed_and_no_supervisor_reclaim_the_job_completes(private_redis, tmp_path):
    """Without the lease threads' reclaim (``reclaim_expired`` in ``redis_leases.tend`` taken out) the killed
    workers' messages stay in ``unacked`` for ``VISIBILITY_S``, the watchdog rightly leaves the job alone while
    they are there, and ``client.wait`` raises TimeoutError after ``BOUND_S``."""
    docs = sample_parts(tmp_path, 4, chars=48000)
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
            expected = graph_and_stats(client, "clean")

            job_id = client.ingest_files("killed", docs)["job_id"]

            def mid_extraction():
                p = client.job("killed", job_id)["progress"]
                return p["chunks_total"] and p["chunks_total"] // 4 <= p["chunks_done"] < p["chunks_total"] * 3 // 4

            wait_for(mid_extraction, "extraction in flight", timeout=300)
            ingest = [proc for name, proc in stack.procs if name.startswith("ingest")]
            assert len(ingest) == 2
            for proc in ingest:  # every ingest worker process, as `kill -9 <pid>` does
                os.kill(proc.pid, signal.SIGKILL)
            killed_at = time.time()
            for proc in ingest:
                proc.wait()
            orphaned = set(client.redis.hkeys(BROKER_UNACKED))
            assert orphaned, "the killed workers held no message: nothing to recover"

            try:
                view = client.wait("killed", job_id, timeout=BOUND_S)
            except TimeoutError as exc:
                raise AssertionError(_post_mortem(client, stack, job_id, killed_at)) from exc
            print(f"job ended {time.time() - killed_at:.0f} s after the kill")  # shown with -s

            assert view["status"] == "succeeded", view["failures"]
            assert view["failures"] == []
            got = graph_and_stats(client, "killed")
            for key in ("documents", "chunks", "entities", "relations", "communities_by_level", "reports",
                        "communities"):
                assert got[key] == expected[key], key
            assert stack.failure is None and stack.supervisor.reclaimed == 0  # not the supervisor's doing
            assert not orphaned & set(client.redis.hkeys(BROKER_UNACKED)), "orphaned messages never restored"
            counts = {to_str(k): int(v) for k, v in client.redis.hgetall(Keys("killed").deliveries(job_id)).items()}
            over = {k: n for k, n in counts.items() if n > 2}  # named on a failure, with the post-mortem
            assert max(counts.values()) == 2, (over, _post_mortem(client, stack, job_id, killed_at))  # redelivered once
            assert max(counts.values()) <= q.max_deliveries(stack.settings)
        finally:
            stack.stop()
