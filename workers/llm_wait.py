"""A job step that found the LLM endpoint unreachable (``LLMUnavailable``: connection errors, timeouts, 5xx or
429 through every retry of a call) waits for it instead of failing: the step's message is enqueued again with a
countdown (``llm.outage_recheck_s``; no worker thread is held meanwhile, and the worker's lease keeps the message
from being redelivered), and the job shows "waiting for the LLM" (``JobStore.llm_waiting``). The LLM answer
cache makes the step's second run ask only what the first did not get. Once the job has waited
``llm.outage_wait_s`` in a row, the next step that finds the endpoint unreachable fails the job with the cause;
its documents end ``failed`` with it (``Job.fail``)."""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable

from shared.infra.jobs.llm_wait import WAIT_SINCE
from shared.infra.jobs.store import TERMINAL
from shared.infra.llm.client import CanceledError, LLMUnavailable
from workers.job import Job

log = logging.getLogger(__name__)
READ = (WAIT_SINCE,)  # read at admission (``job_task(read=READ)``): whether the job waits for the LLM


def wait_for_llm(job: Job, exc: LLMUnavailable) -> None:
    """Enqueue the step again after ``llm.outage_recheck_s``, or fail the job once it has waited
    ``llm.outage_wait_s``; nothing when the job ended meanwhile."""
    msg, llm = job.msg, job.settings.llm
    since, status = job.jobs.llm_waiting(msg.job_id, f"{msg.TASK}:{msg.item()}", str(exc), llm.outage_wait_s)
    if status in TERMINAL:
        return
    waited = time.time() - since
    if waited >= llm.outage_wait_s:
        log.error("job %s: the LLM was unreachable for %.0f s (%s); the job fails", msg.job_id, waited, exc)
        job.fail(f"LLM unreachable for {waited:.0f} s: {exc}")
        return
    log.warning("%s(%s) of job %s: the LLM is unreachable (%s); again in %.1f s, waiting %.0f of %.0f s",
                msg.TASK, msg.item(), msg.job_id, exc, llm.outage_recheck_s, waited, llm.outage_wait_s)
    job.send(msg, countdown=llm.outage_recheck_s)


def llm_answered(job: Job) -> None:
    """The step got its answers: if the job was waiting for the LLM (read at admission), it no longer is."""
    if job.fields.get(WAIT_SINCE):
        job.jobs.llm_answered(job.msg.job_id)


def waits_for_llm(body: Callable[[Job, object], None]) -> Callable[[Job, object], None]:
    """A job step that calls the LLM: ``LLMUnavailable`` raised by ``body`` enqueues the step again (or fails the
    job past the bound) instead of failing it; ``CanceledError`` (the job was canceled between two calls) ends the
    step quietly; a step that got through clears the job's wait."""

    @functools.wraps(body)
    def step(job: Job, msg) -> None:
        try:
            body(job, msg)
        except CanceledError:
            return
        except LLMUnavailable as exc:  # the endpoint is down, not the step at fault
            wait_for_llm(job, exc)
            return
        llm_answered(job)

    return step
