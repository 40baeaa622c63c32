"""Waiting for a job's end: with the asyncio Redis client, for callers on an event loop (the gateway's ``?wait=``,
``AsyncJobStatus``), or blocking (the CLI and the local client, ``wait_finished``); everything else about jobs is
``shared.infra.jobs.JobStore``.

Both waits follow one rule (``_Listen``): subscribe to the job's end message before the first status read (no end
slips between), then re-read the status every ``recheck_s`` in case a message was lost (a Redis restart). A
subscription that fails, at ``subscribe`` or mid-wait (a Redis restarting; a cluster node gone, which a pubsub does
not route around as commands do), leaves the re-reads, which go through the client's retries: the wait never
depends on the message alone, and a failing pubsub never fails the wait."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from redis.exceptions import RedisError

from shared.infra.jobs import TERMINAL, JobStore
from shared.infra.keys import Keys
from shared.infra.redis_conn import apubsub, to_str

RECHECK_ENV = "GRAPHFLEET_WAIT_RECHECK_S"  # Settings.wait_recheck_s: tests make it rare, to show the message wakes


def recheck_interval() -> float:
    """Seconds between the status re-reads of a wait (``Settings.wait_recheck_s``, default 1 s)."""
    from shared.config import get_settings

    return get_settings().wait_recheck_s


class _Listen:
    """The rule of both waits: after each status read, how long to listen for the end message."""

    def __init__(self, seconds: float, recheck_s: float):
        self.deadline, self.recheck_s = time.monotonic() + seconds, recheck_s

    def next(self, status: str | None) -> float | None:
        """Seconds to listen before the next status read; None once the wait is over: the status is final, the
        job is gone (or never was), or the time is up."""
        if status is None or status in TERMINAL:
            return None
        left = self.deadline - time.monotonic()
        return min(self.recheck_s, left) if left > 0 else None


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
        ``GRAPHFLEET_WAIT_RECHECK_S``, 1 s). Never blocks the event loop."""
        listen = _Listen(seconds, recheck_interval() if recheck_s is None else recheck_s)
        pubsub = await self._subscribed(self.k.job_done_channel(job_id))
        try:
            while (timeout := listen.next(status := await self.status(job_id))) is not None:
                if pubsub is None:
                    await asyncio.sleep(timeout)
                    continue
                try:
                    if _ended(await pubsub.get_message(ignore_subscribe_messages=True, timeout=timeout)):
                        return True
                except RedisError:  # the subscription broke: the re-reads carry on
                    await _aclose(pubsub)
                    pubsub = None
            return status in TERMINAL
        finally:
            await _aclose(pubsub)

    async def _subscribed(self, channel: str):
        """``_subscribed`` on the asyncio client."""
        pubsub = None
        try:
            pubsub = apubsub(self.aredis, ignore_subscribe_messages=True)
            await pubsub.subscribe(channel)
            return pubsub
        except RedisError:
            await _aclose(pubsub)
            return None


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


async def _aclose(pubsub) -> None:
    """``_close`` for an asyncio pubsub."""
    if pubsub is not None:
        try:
            await pubsub.aclose()
        except Exception:  # noqa: BLE001
            pass
