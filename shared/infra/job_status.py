"""Waiting for a job's end: with the asyncio Redis client, for callers on an event loop (the gateway's ``?wait=``,
``AsyncJobStatus``), or blocking (the CLI and the local client, ``wait_finished``); everything else about jobs is
``shared.infra.jobs.JobStore``."""

from __future__ import annotations

import asyncio
import time

from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisError

from shared.infra.jobs import TERMINAL, JobStore
from shared.infra.keys import Keys
from shared.infra.redis_conn import apubsub, to_str

RECHECK_ENV = "GRAPHFLEET_WAIT_RECHECK_S"  # Settings.wait_recheck_s: tests make it rare, to show the message wakes


def recheck_interval() -> float:
    """Seconds between the status re-reads of a wait (``Settings.wait_recheck_s``, default 1 s)."""
    from shared.config import get_settings

    return get_settings().wait_recheck_s


class AsyncJobStatus:
    def __init__(self, aredis, tenant: str):
        self.aredis = aredis
        self.k = Keys(tenant)

    async def status(self, job_id: str) -> str | None:
        raw = await self.aredis.hget(self.k.job(job_id), "status")
        return to_str(raw) if raw is not None else None

    async def wait_finished(self, job_id: str, seconds: float, recheck_s: float | None = None) -> bool:
        """Wait until the job ended; False after ``seconds``. Woken by the end-of-job message
        (``JobStore._end`` publishes it with every final status, in the script that writes it), subscribed before
        the first status read so an end between the two is not missed; the status is re-read every ``recheck_s``
        (default ``GRAPHFLEET_WAIT_RECHECK_S``, 1 s) in case the message was lost (a Redis restart).
        Never blocks the event loop."""
        recheck = recheck_interval() if recheck_s is None else recheck_s
        deadline = time.monotonic() + seconds
        pubsub = apubsub(self.aredis, ignore_subscribe_messages=True)
        try:
            await pubsub.subscribe(self.k.job_done_channel(job_id))
            while True:
                if await self.status(job_id) in TERMINAL:
                    return True
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                if await self._message(pubsub, min(recheck, remaining)):
                    return True
        finally:
            await pubsub.aclose()

    @staticmethod
    async def _message(pubsub, timeout: float) -> bool:
        """Whether the end message arrived within ``timeout`` seconds."""
        until = time.monotonic() + timeout
        try:
            while (left := until - time.monotonic()) > 0:
                message = await pubsub.get_message(ignore_subscribe_messages=True, timeout=left)
                if message is not None and message.get("type") == "message":
                    return True
        except RedisError:  # the subscription broke (Redis restarting): the status re-read decides
            await asyncio.sleep(max(0.0, until - time.monotonic()))
        return False


def wait_finished(jobs: JobStore, job_id: str, timeout: float, recheck_s: float = 0.5) -> str | None:
    """Block until the job ends (the CLI, the local client); its final status, or None after ``timeout`` seconds
    (or when the job does not exist). Woken by the end-of-job publish, subscribed before the first read (no end
    slips between); the status is re-read every ``recheck_s`` in case a publish was missed, so the wait never
    depends on the message alone. A subscription that fails (a Redis restarting; a cluster node gone, which a
    pubsub does not route around as commands do) leaves the re-reads, which go through the client's retries."""
    deadline, pubsub = time.monotonic() + timeout, None
    try:
        try:
            pubsub = jobs.redis.pubsub(ignore_subscribe_messages=True)
            pubsub.subscribe(jobs.k.job_done_channel(job_id))
        except RedisConnectionError:
            pubsub = _closed(pubsub)
        while True:
            status = jobs.status(job_id)
            if status is None or status in TERMINAL:
                return status
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            if pubsub is None:
                time.sleep(min(recheck_s, left))
                continue
            try:
                message = pubsub.get_message(timeout=min(recheck_s, left))
            except RedisConnectionError:
                pubsub = _closed(pubsub)
                continue
            if message is not None and message.get("type") == "message":
                return to_str(message["data"])
    finally:
        _closed(pubsub)


def _closed(pubsub) -> None:
    """Close ``pubsub`` (None: nothing), quietly: it may be the connection that failed."""
    try:
        if pubsub is not None:
            pubsub.close()
    except Exception:  # noqa: BLE001
        pass
