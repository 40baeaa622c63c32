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


def in_flight_s(records, start: float = float("-inf"), end: float = float("inf")) -> float:
    """Seconds some call of ``records`` was in flight, within ``[start, end]``."""
    return union_s([(r.ts - r.latency_s, r.ts) for r in records], start, end)
