"""Whether the caller may be served a query index held for an earlier version of its tenant, and after how long.

A batch bumps a tenant's versions; each query worker then rebuilds (updates) its indexes, in the warm-up the batch
announces or on the first query that finds them stale. On a large tenant that takes tens of seconds, and a user's
query that came meanwhile waited for it. A user's query runs inside :func:`serving_stale` instead: once it has
waited ``QuerySettings.stale_index_after_s`` for rebuilds, over all the indexes it reads, an index being rebuilt for
a newer version serves it the version before (never across a tenant deleted and rebuilt: the caches check the
graph's epoch), and the rebuild goes on behind it. Everything else (the warm-ups, the ingestion's own reads, the
builds that feed one index from another) reads outside it and always gets the current version.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from contextvars import ContextVar

# the monotonic time until which this caller waits for rebuilds, summed over every index it reads
_UNTIL: ContextVar[float | None] = ContextVar("graphfleet_stale_index_until", default=None)


def stale_after() -> float | None:
    """Seconds this caller may still wait for a rebuild before it is served the held index (0 once its wait is
    spent); None: it waits for the rebuild."""
    until = _UNTIL.get()
    return None if until is None else max(0.0, until - time.monotonic())


@contextlib.contextmanager
def serving_stale(after_s: float | None) -> Iterator[None]:
    """Within: the caches may serve the index held for an earlier version once ``after_s`` seconds (None: never)
    have passed waiting for rebuilds, counted over every index read within (a query reads half a dozen: each
    waiting its own ``after_s`` would add up).
    A build always reads the current versions (``LRU`` runs it under ``serving_stale(None)``): an index built from
    another one held for an earlier version would be stored as current."""
    token = _UNTIL.set(None if after_s is None else time.monotonic() + after_s)
    try:
        yield
    finally:
        _UNTIL.reset(token)


def may_stand(held: tuple, now: tuple) -> bool:
    """Whether an index built for the versions ``held`` may serve a reader while the one for ``now`` is built: the
    last item of each, the graph's epoch, is set and the same (a tenant deleted and rebuilt counts its versions
    from 0 again under a new epoch), and no other version has gone back."""
    if len(held) != len(now) or held[-1] is None or held[-1] != now[-1]:
        return False
    return all(int(h or 0) <= int(n or 0) for h, n in zip(held[:-1], now[:-1], strict=True))
