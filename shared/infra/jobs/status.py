"""Waiting for a job's end: with the asyncio Redis client, for callers on an event loop (the gateway's ``?wait=``,
``AsyncJobStatus``), or blocking (the CLI and the local client, ``wait_finished``); everything else about jobs is
``shared.infra.jobs.store.JobStore``.

Both waits follow one rule (``_Listen``): subscribe to the job's end message before the first status read (no end
slips between), then re-read the status every ``recheck_s`` in case a message was lost (a Redis restart). A
subscription that fails, at ``subscribe`` or mid-wait (a Redis restarting; a cluster node gone, which a pubsub does
not route around as commands do), leaves the re-reads, which go through the client's retries: the wait never
depends on the message alone, and a failing pubsub never fails the wait. The asyncio waits share one subscription
per client (``channel_listener``), which tells them when it was lost; so their re-reads space out (``grow``)."""

from __future__ import annotations

import time
from collections.abc import Callable

from redis.exceptions import RedisError

from shared.infra.jobs.store import TERMINAL, JobStore
from shared.infra.messaging.channel_listener import ChannelListener
from shared.infra.redis.conn import to_str
from shared.infra.redis.keys import Keys

RECHECK_ENV = "GRAPHFLEET_WAIT_RECHECK_S"  # Settings.wait_recheck_s: tests make it rare, to show the message wakes


def recheck_interval() -> float:
    """Seconds between the status re-reads of a wait (``Settings.wait_recheck_s``, default 1 s)."""
    from shared.config import get_settings

    return get_settings().wait_recheck_s


RECHECK_MAX_S = 8.0  # the asyncio wait's re-reads space out up to this (its subscription reports its own losses)


class _Listen:
    """The rule of both waits: after each status read, how long to listen for the end message. With ``grow``,
    each pause doubles up to ``RECHECK_MAX_S`` (or ``recheck_s`` if longer): the first re-read covers an end that
    came between the subscription and the first read, and a lost subscription is reported by its listener."""

    def __init__(self, seconds: float, recheck_s: float, grow: bool = False):
        self.deadline, self.recheck_s = time.monotonic() + seconds, recheck_s
        self.cap = max(recheck_s, RECHECK_MAX_S) if grow else recheck_s

    def next(self, status: str | None) -> float | None:
        """Seconds to listen before the next status read; None once the wait is over: the status is final, the
        job is gone (or never was), or the time is up."""
        if status is None or status in TERMINAL:
            return None
        left = self.deadline - time.monotonic()
        if left <= 0:
            return None
        pause, self.recheck_s = min(self.recheck_s, left), min(2 * self.recheck_s, self.cap)
        return pause


def _ended(message) -> str | None:
    """The final status an end-of-job message carries (``JobStore._end`` publishes it); None for anything else."""
    return to_str(message["data"]) if message is not None and message.get("type") == "message" else None


class AsyncJobStatus:
    def __init__(self, aredis, tenant: str):
        self.aredis = aredis
        self.k = Keys(tenant)

    async def status(self, job_id: str) -> str | None:
        raw = await self.aredis.hget(self.k.job(job_id), "status")
        return to_str(raw) if raw is not None else None

    async def wait_finished(self, job_id: str, seconds: float, recheck_s: float | None = None) -> bool:
        """Whether the job ended within ``seconds`` (the module's rule; ``recheck_s`` defaults to
        ``GRAPHFLEET_WAIT_RECHECK_S``, 1 s). Never blocks the event loop; the end message comes through the
        client's one shared subscription (``channel_listener``), not a connection per wait: a message ends the
        wait; a reconnection of that subscription (``LOST``) re-reads the status, and so does a pause without
        either: ``recheck_s``, then twice as long each time up to ``RECHECK_MAX_S``."""
        listen = _Listen(seconds, recheck_interval() if recheck_s is None else recheck_s, grow=True)
        listener = ChannelListener.of(self.aredis)
        async with listener.watch(self.k.job_done_channel(job_id), connect_s=min(1.0, listen.recheck_s)) as box:
            while (timeout := listen.next(status := await self.status(job_id))) is not None:
                if isinstance(await box.get(timeout), tuple):  # its end message
                    return True
            return status in TERMINAL


def wait_finished(jobs: JobStore, job_id: str, timeout: float, recheck_s: float = 0.5,
                  on_recheck: Callable[[str], None] | None = None) -> str | None:
    """Block until the job ends (the CLI, the local client): its final status, or None after ``timeout`` seconds
    or when the job does not exist (the module's rule). ``on_recheck(status)`` runs after each status read that
    did not end the wait: about every ``recheck_s`` (the CLI's progress line)."""
    listen = _Listen(timeout, recheck_s)
    pubsub = _subscribed(jobs, jobs.k.job_done_channel(job_id))
    try:
        while (left := listen.next(status := jobs.status(job_id))) is not None:
            if on_recheck:
                on_recheck(status)
            if pubsub is None:
                time.sleep(left)
                continue
            try:
                if ended := _ended(pubsub.get_message(timeout=left)):
                    return ended
            except RedisError:  # the subscription broke: the re-reads carry on
                _close(pubsub)
                pubsub = None
        return status if status in TERMINAL else None
    finally:
        _close(pubsub)


def _subscribed(jobs: JobStore, channel: str):
    """A pubsub subscribed to ``channel``; None when subscribing failed (the wait then re-reads the status)."""
    pubsub = None
    try:
        pubsub = jobs.redis.pubsub(ignore_subscribe_messages=True)
        pubsub.subscribe(channel)
        return pubsub
    except RedisError:
        _close(pubsub)
        return None


def _close(pubsub) -> None:
    """Close ``pubsub`` if there is one, quietly: it may be the connection that failed."""
    if pubsub is not None:
        try:
            pubsub.close()
        except Exception:  # noqa: BLE001
            pass
