"""The task shell: what every job task does around its body, written once.

``@job_task(MessageType, guard=..., mark=...)`` registers ``body(job, msg)`` as the Celery task of
``MessageType.TASK``. Around the body the shell:

1. reads the typed message (keyword fields; the positional lists of earlier releases too);
2. counts the delivery of (job, task, item) and applies the guard, in one round trip
   (``JobStore.admit``). A message only comes back when its worker was lost (SIGKILL, OOM, a hard time
   limit), so past ``1 + workers.max_redeliveries`` deliveries the item is poison: ``give_up`` records it
   (a failed chunk, or a failed job) instead of running it. The guard skips the task when the job was
   canceled (``"canceled"``), has ended (``"ended"``), is not running (``"running"``), or when moving it
   to ``mark`` fails because it ended (``"active"``); the job is marked running at ``mark``; the job fields
   named in ``read`` come back in the same round trip (``job.fields``: a query's parameters);
4. runs the body; an exception that escapes it (or the hard time limit) calls the same ``give_up``
   from ``on_failure``, so no fan-in barrier waits for it forever; Redis being unreachable is not the
   item's fault: the message is requeued instead.

Task metrics are Celery signal handlers (``workers.metrics_signals``), not calls in the shell.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from celery import Task
from celery.exceptions import Reject
from kombu.exceptions import OperationalError
from redis.exceptions import ClusterError, RedisClusterException, TryAgainError
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from shared.infra.messaging.messages import Message
from shared.infra.messaging.queueing import delivery_exhausted, max_deliveries
from workers.celery_app import app
from workers.job import Job, fail_job
from workers.runtime import runtime

log = logging.getLogger(__name__)

REDELIVERY_LIMIT = "redelivery limit"
# Redis (state or broker) unreachable: not the item's fault. The message is requeued (or, if Redis is
# still down, stays unacked and comes back after the visibility timeout) instead of being acked as failed,
# which would strand the job in ``running`` (tests/reliability/test_faults.py, Redis restart).
# A cluster mid-failover (slot not served, cluster down, try again) is the same kind of moment.
INFRA_ERRORS = (RedisConnectionError, RedisTimeoutError, OperationalError, ClusterError, RedisClusterException,
                TryAgainError)


class JobTask(Task):
    message: type[Message] = Message
    guard: str | None = None
    mark: str | None = None
    read: tuple[str, ...] = ()
    give_up: Callable[[Job, str], None] | None = None

    def __call__(self, *args, **kwargs):
        try:
            return super().__call__(*args, **kwargs)  # -> ``run``: the admission, then the body
        except INFRA_ERRORS as exc:
            msg = self.message.from_call(args, kwargs)
            log.warning("%s(%s) of job %s: state Redis or broker unreachable (%r); message requeued", self.name,
                        msg.item(), msg.job_id, exc)
            raise Reject(exc, requeue=True) from exc

    def admitted(self, job: Job) -> bool:
        """Count this delivery and apply the guard (``JobStore.admit``); a poison item is given up."""
        msg, settings = job.msg, job.rt.settings
        count, admitted, job.fields = job.jobs.admit(msg.job_id, self.name, msg.item(), max_deliveries(settings),
                                                     self.guard, self.mark, self.read)
        if not delivery_exhausted(count, settings):
            return admitted
        cause = f"{REDELIVERY_LIMIT}: delivered {count} times, its worker was lost every time"
        log.error("%s(%s) of job %s: %s; giving up", self.name, msg.item(), msg.job_id, cause)
        self._give_up(job, cause)
        return False

    def on_failure(self, exc, task_id, args, kwargs, einfo) -> None:
        msg = self.message.from_call(args, kwargs)
        log.error("%s(%s) of job %s failed: %r", self.name, msg.item(), msg.job_id, exc)
        try:
            self._give_up(Job(runtime(), msg, task_id or ""), f"{type(exc).__name__}: {exc}"[:500])
        except Exception:  # noqa: BLE001 - the hook must not hide the original failure
            log.exception("could not record the failure of %s for job %s", self.name, msg.job_id)

    def _give_up(self, job: Job, cause: str) -> None:
        (self.give_up or fail_job)(job, cause)


def job_task(message: type[Message], *, guard: str | None = "canceled", mark: str | None = None,
             read: tuple[str, ...] = (), give_up: Callable[[Job, str], None] | None = None):
    """Register ``body(job, msg)`` as the task of ``message`` (see the module docstring)."""

    def register(body: Callable[[Job, Message], None]):
        def run(self, *args, **kwargs) -> None:
            msg = self.message.from_call(args, kwargs)
            job = Job(runtime(), msg, self.request.id or "", self.request.hostname or "")
            if self.admitted(job):
                body(job, msg)

        run.__name__, run.__doc__, run.__module__ = body.__name__, body.__doc__, body.__module__
        return app.task(name=message.TASK, bind=True, base=JobTask, message=message, guard=guard, mark=mark,
                        read=read, give_up=staticmethod(give_up) if give_up else None)(run)

    return register
