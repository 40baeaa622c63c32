"""An ended job's per-chunk bookkeeping expires: a tenant's memory does not grow with its job history.

What a job's run, a resume or the watchdog read (its chunk and document sets, planned batches and their done sets,
stage claims, delivery counts, extraction warnings: an entry per chunk, document or batch) expires
``jobs.bookkeeping_ttl_s`` after the job ends. Its hash, usage, failures and stage times stay: they are its view. The
counts the view reads from the sets are kept in the job's hash (``ENDED_COUNTS``). Expiring, not deleting, leaves a
late redelivery of the job's last step what it reads.
"""

from __future__ import annotations

import json

from shared.infra.redis.conn import to_str
from shared.infra.redis.keys import Keys

ENDED_COUNTS = "ended_counts"  # job field: [chunks, chunks finished, documents chunked] recorded at its end


def bookkeeping_keys(k: Keys, job_id: str, batch_stages: list[str], fields: dict[str, str]) -> list[str]:
    """The keys of an ended job that expire; a stage's planned batches are counted in its ``<stage>_batches``
    field."""
    keys = [k.job_chunks(job_id), k.job_chunks_done(job_id), k.job_docs(job_id), k.job_docs_done(job_id),
            k.job_docs_files(job_id), k.job_docs_parsed(job_id), k.job_flags(job_id), k.job_warnings(job_id),
            k.job_batch_stages(job_id), k.deliveries(job_id)]
    for stage in batch_stages:
        keys.append(k.job_stage_done(job_id, stage))
        keys += [k.job_batch(job_id, stage, i) for i in range(int(fields.get(f"{stage}_batches") or 0))]
    return keys


def expire_bookkeeping(redis, k: Keys, job_id: str) -> None:
    """Record the ended job's counts in its hash (once) and set its bookkeeping to expire."""
    from shared.config import get_settings

    pipe = redis.pipeline(transaction=True)
    pipe.scard(k.job_chunks(job_id))
    pipe.scard(k.job_chunks_done(job_id))
    pipe.scard(k.job_docs_done(job_id))
    pipe.smembers(k.job_batch_stages(job_id))
    pipe.hgetall(k.job(job_id))
    total, finished, docs_chunked, stages, raw = pipe.execute()
    fields = {to_str(key): to_str(v) for key, v in raw.items()}
    ttl = get_settings().jobs.bookkeeping_ttl_s
    pipe = redis.pipeline(transaction=True)
    if ENDED_COUNTS not in fields:
        pipe.hset(k.job(job_id), ENDED_COUNTS, json.dumps([total, finished, docs_chunked]))
    for key in bookkeeping_keys(k, job_id, sorted(to_str(s) for s in stages), fields):
        pipe.expire(key, ttl)
    pipe.execute()
