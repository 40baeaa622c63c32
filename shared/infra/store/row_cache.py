"""Parsed entity and relation rows per tenant and graph version, per process.

A local query reads a few hundred entity and relation rows; parsing each one from JSON again, when the previous
query already read it, was a large share of a query worker's CPU per warm local answer.

Every write of an entity or a relation increments the tenant's graph version in the same transaction
(``GraphStore.merge_*``), which also sets the graph's epoch if absent (a deleted tenant's counter starts again
from 0; its epoch does not repeat), so rows parsed under one (version, epoch) are the stored rows of that
version: the cache is read-only state keyed by it, never coordination, and a new version starts it afresh.

A row read between a write and the next version read is newer than the version it is filed under; the next
read sees the newer version and drops it, so no stale row outlives its version. Absent rows are remembered too
(None). The degree is not cached: it is written apart from the version (``set_degrees``) and read with it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable, Iterable
from typing import Generic, TypeVar

from shared.infra.store.lru import CACHED_TENANTS, LRU

T = TypeVar("T")

# rows of one kind held per process, over all tenants: beyond it they start afresh. A parsed row with its
# description is ~1-2 KB, so a process holds at most ~150 MB of each kind; a query reads a few hundred rows
MAX_ROWS = 100_000


class VersionRows(Generic[T]):
    """key -> parsed row (None: absent) of one kind, for each tenant's current graph version."""

    def __init__(self, capacity: int = CACHED_TENANTS):
        self._tenants: LRU[str, tuple[Hashable, object, dict[str, T | None]]] = LRU(capacity)
        self._lock = threading.Lock()

    def rows(self, tenant: str, version: Hashable, redis, keys: Iterable[str],
             read: Callable[[list[str]], list[T | None]]) -> dict[str, T | None]:
        """The rows of ``keys`` at ``version``; ``read(missing)`` reads and parses those not held yet."""
        with self._lock:
            rows = self._held(tenant, version, redis)
            missing = [k for k in keys if k not in rows]
        if missing:
            fresh = dict(zip(missing, read(missing), strict=True))
            with self._lock:
                rows.update(fresh)
        return rows

    def fill(self, tenant: str, version: Hashable, redis, parsed: dict[str, T]) -> None:
        """File rows parsed after ``version`` was read (a whole graph read by the cache warmer), as ``rows``
        files those it reads: a tenant's first query then parses none of them again."""
        with self._lock:
            self._held(tenant, version, redis).update(parsed)

    def _held(self, tenant: str, version: Hashable, redis) -> dict[str, T | None]:
        """The tenant's rows at ``version`` (started afresh at another version, or past ``MAX_ROWS`` held)."""
        held = self._tenants.get(tenant)
        if held is None or held[0] != version or held[1] is not redis:
            held = (version, redis, {})
            self._tenants.put(tenant, held)
        if sum(len(rows) for _v, _r, rows in self._tenants.values()) > MAX_ROWS:
            self._tenants.clear()
            held = (version, redis, {})
            self._tenants.put(tenant, held)
        return held[2]

    def clear(self) -> None:
        with self._lock:
            self._tenants.clear()
