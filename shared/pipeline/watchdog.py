"""The job watchdog: a job never stays ``running`` because a message was lost.

Acks-late delivery covers a lost *worker*: its messages stay in kombu's ``unacked`` hash and come
back after the visibility timeout. It does not cover a lost *message*: one that was never written, or
that left the broker without being acked into a result (kombu's restore on a broken connection during
a Redis restart; an operator flushing a queue). Then a fan-in barrier waits forever.

Every ``workers.watchdog_interval_s`` one worker in the fleet (a Redis lock) sweeps the active jobs
(``gf:active_jobs``). A job is *stalled* when its progress fingerprint (``JobStore.progress``, O(1)
counters: items delivered, finished chunks, claims, batches, status, stage) has not changed for
``workers.stall_timeout_s`` **and** none of its messages is in a queue or in the ``unacked`` hash in
two consecutive sweeps (a message moving between the two is briefly in neither). Only then the job's
full state is read (``JobStore.snapshot``) and the steps
of :func:`shared.pipeline.resume.plan_resume` are enqueued again; they are idempotent. Each resume is
counted on the job (``resumes``), logged, and exported as ``graphfleet_job_resumes_total``.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterable

from shared.infra import queueing as q
from shared.infra.jobs import TERMINAL, JobStore, parse_active_member
from shared.infra.keys import BROKER_UNACKED, active_jobs_key, broker_queue_keys, watchdog_key, watchdog_lock_key
from shared.infra.messages import Message
from shared.infra.redis_conn import to_str
from shared.pipeline.resume import Step, plan_resume

log = logging.getLogger(__name__)


def broker_keys(queues: Iterable[str]) -> list[str]:
    return [key for name in queues for key in broker_queue_keys(name)]


def jobs_with_messages(redis, job_ids: set[str], queues: Iterable[str]) -> set[str]:
    """Which of ``job_ids`` have a message queued or in flight (delivered, not acked). Messages carry
    the job id in their ``kwargsrepr`` header (``argsrepr`` in earlier releases), so a substring test over
    the raw message is enough."""
    if not job_ids:
        return set()
    found: set[str] = set()
    ids = [(jid, jid.encode()) for jid in job_ids]

    def scan(raw: bytes) -> None:
        for jid, needle in ids:
            if jid not in found and needle in raw:
                found.add(jid)

    for key in broker_keys(queues):
        for raw in redis.lrange(key, 0, -1):
            scan(raw)
    for _tag, raw in redis.hscan_iter(BROKER_UNACKED, count=1000):
        scan(raw)
    return found


class Watchdog:
    """One sweep at a time across the fleet; ``send(message)`` enqueues a task message."""

    def __init__(self, redis, settings, send: Callable[[Message], None], queues: Iterable[str] = q.QUEUES):
        self.redis = redis
        self.settings = settings
        self.send = send
        self.queues = [*queues, "default"]

    def sweep(self, now: float | None = None) -> list[tuple[str, str, list[Step]]]:
        """Resume the stalled jobs; returns ``(tenant, job_id, steps sent)`` per resumed job. Returns []
        without sweeping when another worker holds the sweep lock."""
        w = self.settings.workers
        lock = self.redis.lock(watchdog_lock_key(), timeout=max(10.0, 4 * w.watchdog_interval_s),
                               blocking_timeout=0)
        if not lock.acquire(blocking=False):
            return []
        try:
            return self._sweep(time.time() if now is None else now)
        finally:
            try:
                lock.release()
            except Exception:  # noqa: BLE001 - the lock expired during a long sweep: harmless
                pass

    def _sweep(self, now: float) -> list[tuple[str, str, list[Step]]]:
        stall = self.settings.workers.stall_timeout_s
        members = [to_str(m) for m, _ in self.redis.zscan_iter(active_jobs_key(), count=1000)]
        seen = {to_str(k): json.loads(v) for k, v in self.redis.hgetall(watchdog_key()).items()}
        state: dict[str, dict] = {}
        stalled = {}
        for member in members:
            tenant, job_id = parse_active_member(member)
            status, fp = JobStore(self.redis, tenant).progress(job_id)
            if status is None or status in TERMINAL:
                self.redis.zrem(active_jobs_key(), member)  # ended (or expired) but still listed
                continue
            prev = seen.get(member) or {}
            entry = {"fp": fp, "since": now, "idle": 0}
            if prev.get("fp") == fp:
                entry["since"] = prev["since"]
                entry["idle"] = prev.get("idle", 0)
            state[member] = entry
            if now - entry["since"] >= stall:
                stalled[job_id] = (member, tenant)
        busy = jobs_with_messages(self.redis, set(stalled), self.queues)
        resumed = []
        for job_id, (member, tenant) in stalled.items():
            entry = state[member]
            if job_id in busy:
                entry["idle"] = 0
                continue
            entry["idle"] += 1
            if entry["idle"] < 2:  # not in the broker in two consecutive sweeps
                continue
            snap = JobStore(self.redis, tenant).snapshot(job_id)
            sent = self._resume(snap) if snap is not None else []
            entry.update(since=now, idle=0)
            if sent:
                resumed.append((tenant, job_id, sent))
        pipe = self.redis.pipeline()
        pipe.delete(watchdog_key())
        if state:
            pipe.hset(watchdog_key(), mapping={m: json.dumps(e) for m, e in state.items()})
        pipe.execute()
        return resumed

    def _resume(self, snap) -> list[Step]:
        from shared.infra.metrics import record_job_resumed

        jobs = JobStore(self.redis, snap.tenant)
        sent: list[Step] = []
        for step in plan_resume(snap):
            if step.claim and not jobs.claim_advance(snap.job_id, step.claim, f"watchdog:{time.time()}"):
                break  # another task advanced the job meanwhile: it is not stalled
            self.send(step.message(snap))
            sent.append(step)
        if sent:
            stages = sorted({s.stage for s in sent})
            self.redis.hincrby(jobs.k.job(snap.job_id), "resumes", 1)
            for stage in stages:
                record_job_resumed(snap.kind, stage)
            log.warning("job %s/%s stalled with no message queued or in flight; re-enqueued %d step(s) of %s",
                        snap.tenant, snap.job_id, len(sent), ",".join(stages))
        return sent
