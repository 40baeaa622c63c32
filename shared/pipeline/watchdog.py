"""The job watchdog: a job never stays ``running`` because a message was lost.

Acks-late delivery covers a lost *worker*: its messages stay in kombu's ``unacked`` hash and come
back after the visibility timeout. It does not cover a lost *message*: one that was never written, or
that left the broker without being acked into a result (kombu's restore on a broken connection during
a Redis restart; an operator flushing a queue). Then a fan-in barrier waits forever.

Every ``workers.watchdog_interval_s`` one worker in the fleet (a Redis lock) sweeps the active jobs
(``gf:active_jobs``). A job is *stalled* when its progress fingerprint (``JobStore.progress``, O(1)
counters: items delivered, finished chunks, claims, batches, status, stage) has not changed for
``workers.stall_timeout_s`` **and** none of its messages is in the broker in two consecutive sweeps (a
message moving between a queue and the ``unacked`` hash is briefly in neither). On a Redis broker, whose
queues and ``unacked`` hash the sweep reads whole, ``workers.lost_timeout_s`` (20 s) replaces the stall
timeout when shorter: there a job with no progress and no message anywhere has lost one, and the likeliest
loss is a worker killed between kombu's ``BRPOP`` (the message leaves the queue) and its ``QoS.append``
(the message enters ``unacked``), which no lease and no visibility timeout can bring back. A job whose
messages sit in ``unacked`` (a dead worker's, until their leases age out) is still left alone.

The broker is asked through ``shared.infra.messaging.broker_probe``: on Redis (and Sentinel) its queues and
``unacked`` hash are scanned for the job id; on RabbitMQ, where a queue cannot be read without taking its
messages, a job counts as having messages while any watched queue has a ready message, a worker holds one
of its messages (``inspect``), or a consumer did not answer (see ``AmqpProbe.jobs_with_messages``). Only
then the job's full state is read (``JobStore.snapshot``) and the steps
of :func:`shared.pipeline.resume.plan_resume` are enqueued again; they are idempotent. Each resume is
counted on the job (``resumes``), logged, and exported as ``graphfleet_job_resumes_total``.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterable

from shared.infra.jobs.store import TERMINAL, JobStore, parse_active_member
from shared.infra.messaging import queueing as q
from shared.infra.messaging.broker_probe import (
    default_probe,
    jobs_with_messages,  # noqa: F401 - re-exported
)
from shared.infra.messaging.messages import Message
from shared.infra.redis.conn import to_str
from shared.infra.redis.keys import active_jobs_key, broker_queue_keys, watchdog_key, watchdog_lock_key
from shared.pipeline.recluster import deferring, ingesting, submit_due
from shared.pipeline.resume import Step, plan_resume

log = logging.getLogger(__name__)
CREATE_GRACE_S = 60.0  # a job listed without its record yet is left alone this long


def broker_keys(queues: Iterable[str]) -> list[str]:
    return [key for name in queues for key in broker_queue_keys(name)]


class Watchdog:
    """One sweep at a time across the fleet; ``send(message)`` enqueues a task message. ``redis`` is the state
    Redis; ``probe`` (``shared.infra.messaging.broker_probe``) says which jobs have messages in the broker (by default
    that of ``settings``' broker: the state Redis itself when no broker is set apart)."""

    def __init__(self, redis, settings, send: Callable[[Message], None], queues: Iterable[str] = q.QUEUES,
                 probe=None):
        self.redis = redis
        self.settings = settings
        self.send = send
        self.queues = [*queues, "default"]
        self.probe = probe if probe is not None else default_probe(settings, redis)

    def sweep(self, now: float | None = None) -> list[tuple[str, str, list[Step]]]:
        """Resume the stalled jobs, then submit the ``recluster`` jobs due; returns ``(tenant, job_id, steps
        sent)`` per resumed job. Returns [] without sweeping when another worker holds the sweep lock."""
        w = self.settings.workers
        lock = self.redis.lock(watchdog_lock_key(), timeout=max(10.0, 4 * w.watchdog_interval_s),
                               blocking_timeout=0)
        if not lock.acquire(blocking=False):
            return []
        now = time.time() if now is None else now
        try:
            resumed = self._sweep(now)
            self._submit_reclusters(now)
            return resumed
        finally:
            try:
                lock.release()
            except Exception:  # noqa: BLE001 - the lock expired during a long sweep: harmless
                pass

    def _submit_reclusters(self, now: float) -> None:
        """The whole-graph clusterings left for later (``shared.pipeline.recluster``), for the tenants now due; a
        tenant with an ingestion listed in ``gf:active_jobs`` is not quiet, whatever that job's state."""
        if deferring(self.settings):
            busy = ingesting(to_str(m) for m, _t in self.redis.zscan_iter(active_jobs_key(), count=1000))
            submit_due(self.redis, self.settings, self.send, busy, now)

    def _live(self, member: str, listed_at: float, now: float) -> tuple[str, str, str] | None:
        """(tenant, job id, progress fingerprint) of a listed job still running, else None."""
        tenant, job_id = parse_active_member(member)
        status, fp = JobStore(self.redis, tenant).progress(job_id)
        if status is None and now - listed_at < CREATE_GRACE_S:
            return None  # listed a moment before its record is written (JobStore.create): not gone
        if status is None or status in TERMINAL:
            self.redis.zrem(active_jobs_key(), member)  # ended (or expired) but still listed
            return None
        return tenant, job_id, fp

    def stall_timeout(self) -> float:
        """How long a job with no progress waits before the broker is asked whether it lost a message."""
        w = self.settings.workers
        if getattr(self.probe, "kind", None) == "redis":  # every message seen: a job without any lost one
            return min(w.stall_timeout_s, w.lost_timeout_s)
        return w.stall_timeout_s

    def _sweep(self, now: float) -> list[tuple[str, str, list[Step]]]:
        stall = self.stall_timeout()
        members = [(to_str(m), float(t)) for m, t in self.redis.zscan_iter(active_jobs_key(), count=1000)]
        seen = {to_str(k): json.loads(v) for k, v in self.redis.hgetall(watchdog_key()).items()}
        state: dict[str, dict] = {}
        stalled = {}
        for member, listed_at in members:
            live = self._live(member, listed_at, now)
            if live is None:
                continue
            tenant, job_id, fp = live
            prev = seen.get(member) or {}
            entry = {"fp": fp, "since": now, "idle": 0}
            if prev.get("fp") == fp:
                entry["since"] = prev["since"]
                entry["idle"] = prev.get("idle", 0)
            state[member] = entry
            if now - entry["since"] >= stall:
                stalled[job_id] = (member, tenant)
        busy = self.probe.jobs_with_messages(set(stalled), self.queues) if stalled else set()
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
            sent = self._resume(snap, now) if snap is not None else []
            entry.update(since=now, idle=0)
            if sent:
                resumed.append((tenant, job_id, sent))
        pipe = self.redis.pipeline(transaction=True)
        pipe.delete(watchdog_key())
        if state:
            pipe.hset(watchdog_key(), mapping={m: json.dumps(e) for m, e in state.items()})
        pipe.execute()
        return resumed

    def _resume(self, snap, now: float) -> list[Step]:
        from shared.infra.observability.metrics import record_job_resumed

        jobs = JobStore(self.redis, snap.tenant)
        sent: list[Step] = []
        for step in plan_resume(snap, now):
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
