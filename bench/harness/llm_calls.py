"""Where an ingestion's wall time goes against its LLM calls, measured from the job's own usage records."""

from __future__ import annotations


def union_s(intervals: list[tuple[float, float]], start: float, end: float) -> float:
    """Seconds of ``[start, end]`` covered by at least one of ``intervals``."""
    covered, reach = 0.0, start
    for lo, hi in sorted((max(lo, start), min(hi, end)) for lo, hi in intervals):
        if hi > reach:
            covered += hi - max(lo, reach)
            reach = hi
    return covered


def job_calls(redis_url: str, tenant: str, job_ids: list[str], started: float, ended: float) -> dict[str, list]:
    """Per job, the usage records of its LLM calls (retries included, cache hits left out) between ``started``
    and ``ended`` (``time.time()``, a second of slack each side)."""
    from shared.infra.redis.conn import connect
    from shared.infra.tenancy.usage import read_usage

    redis = connect(redis_url)
    try:
        records = [r for r in read_usage(redis, tenant, started - 1, ended + 1) if not r.cache_hit]
    finally:
        redis.close()
    return {job_id: [r for r in records if r.job_id == job_id] for job_id in job_ids}


def in_flight_s(records, start: float = float("-inf"), end: float = float("inf")) -> float:
    """Seconds some call of ``records`` was in flight, within ``[start, end]``."""
    return union_s([(r.ts - r.latency_s, r.ts) for r in records], start, end)
