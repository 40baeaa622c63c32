"""A job's status read with the asyncio Redis client, for callers on an event loop (the gateway's
``?wait=``); everything else about jobs is ``shared.infra.jobs.JobStore``."""

from __future__ import annotations

import asyncio
import time

from shared.infra.jobs import TERMINAL
from shared.infra.keys import Keys
from shared.infra.redis_conn import to_str


class AsyncJobStatus:
    def __init__(self, aredis, tenant: str):
        self.aredis = aredis
        self.k = Keys(tenant)

    async def status(self, job_id: str) -> str | None:
        raw = await self.aredis.hget(self.k.job(job_id), "status")
        return to_str(raw) if raw is not None else None

    async def wait_finished(self, job_id: str, seconds: float) -> bool:
        """Poll the status (20 ms, growing to 250 ms) until the job ended; False after ``seconds``. Never
        blocks the event loop."""
        deadline, delay = time.monotonic() + seconds, 0.02
        while True:
            if await self.status(job_id) in TERMINAL:
                return True
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            await asyncio.sleep(min(delay, remaining))
            delay = min(0.25, delay * 1.5)
