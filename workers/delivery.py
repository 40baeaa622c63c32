"""Hooks around every job task (arguments ``tenant, job_id, *item``): the redelivery cap and the
error path, so a job always ends instead of looping or staying ``running`` forever.

* Before the body runs, the delivery of (job, task, item) is counted in Redis
  (``shared.infra.queueing.count_delivery``). A message only comes back when its worker was lost (SIGKILL,
  OOM, a hard time limit), so past ``1 + workers.max_redeliveries`` deliveries the item is a poison
  item: the task's ``give_up`` records it (a failed chunk, or a failed job) instead of running it.
* ``on_failure`` (an exception escaped the body, or the hard time limit fired; such messages are
  acked and never come back) calls the same ``give_up``, so no fan-in barrier waits for it forever.

Tasks choose their ``give_up(tenant, job_id, item, cause, token)`` with the ``give_up=`` option of
``@app.task``; the default fails the job with the cause.
"""

from __future__ import annotations

import logging

from celery import Task
from celery.exceptions import Reject
from kombu.exceptions import OperationalError
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from shared.infra.queueing import count_delivery, delivery_exhausted
from workers.runtime import runtime

log = logging.getLogger(__name__)

REDELIVERY_LIMIT = "redelivery limit"
# Redis (state or broker) unreachable: not the item's fault. The message is requeued (or, if Redis is
# still down, stays unacked and comes back after the visibility timeout) instead of being acked as failed,
# which would strand the job in ``running`` (tests/reliability/test_faults.py, Redis restart).
INFRA_ERRORS = (RedisConnectionError, RedisTimeoutError, OperationalError)


def fail_job(tenant: str, job_id: str, stage: str, cause: str) -> None:
    runtime().jobs(tenant).finish(job_id, "failed", error=f"{stage}: {cause}"[:500])


class JobTask(Task):
    give_up = None  # staticmethod(tenant, job_id, item: list, cause: str, token: str) or None

    def __call__(self, *args, **kwargs):
        try:
            return self._counted_call(*args, **kwargs)
        except INFRA_ERRORS as exc:
            log.warning("%s%s of job %s: Redis unreachable (%r); message requeued", self.name, args[2:], args[1], exc)
            raise Reject(exc, requeue=True) from exc

    def _counted_call(self, *args, **kwargs):
        tenant, job_id, *item = args
        rt = runtime()
        count = count_delivery(rt.redis, tenant, job_id, self.name, ":".join(map(str, item)) or "-")
        if delivery_exhausted(count, rt.settings):
            cause = f"{REDELIVERY_LIMIT}: delivered {count} times, its worker was lost every time"
            log.error("%s%s of job %s: %s; giving up", self.name, item, job_id, cause)
            self._give_up(tenant, job_id, item, cause, self.request.id or "")
            return None
        return super().__call__(*args, **kwargs)

    def on_failure(self, exc, task_id, args, kwargs, einfo) -> None:
        tenant, job_id, *item = args
        log.error("%s%s of job %s failed: %r", self.name, item, job_id, exc)
        try:
            self._give_up(tenant, job_id, item, f"{type(exc).__name__}: {exc}"[:500], task_id)
        except Exception:  # noqa: BLE001 - the hook must not hide the original failure
            log.exception("could not record the failure of %s for job %s", self.name, job_id)

    def _give_up(self, tenant: str, job_id: str, item: list, cause: str, token: str) -> None:
        if self.give_up is None:
            fail_job(tenant, job_id, self.name.rsplit(".", 1)[-1], cause)
        else:
            self.give_up(tenant, job_id, item, cause, token)
