"""A small thread-safe LRU map for per-process read caches (parsed rows, indexes) keyed by tenant.

Read caches only, never coordination: a miss rebuilds from Redis. Bounded so a process that serves
many tenants keeps only the most recently used ones: by entry count, and optionally by bytes (``max_bytes``
with ``size_of`` giving each value's size), since one large tenant's index can outweigh a hundred small ones.

A reader that may be served the value held for an earlier version (a user's query, ``stale_reads``) does not wait
long for a rebuild: the rebuild runs behind it, and it gets the held value when the rebuild is not done within
``stale_after`` seconds.
"""

from __future__ import annotations

import logging
import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterator
from typing import Generic, TypeVar

from shared.infra.store.stale_reads import serving_stale

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")

CACHED_TENANTS = 32  # per process, for each per-tenant read cache
BUILD_STRIPES = 64  # build locks per cache: two keys share one only by their hashes' chance
log = logging.getLogger(__name__)


class LRU(Generic[K, V]):
    def __init__(self, capacity: int | None, max_bytes: int | None = None, size_of: Callable[[V], int] | None = None):
        """``capacity``: entries at most (None: no count bound); ``max_bytes``: the sum of ``size_of`` over
        the entries at most (None: no byte bound). The newest entry is always kept, even alone over the bound."""
        if capacity is not None and capacity < 1:
            raise ValueError("capacity must be at least 1")
        if max_bytes is not None and (max_bytes < 1 or size_of is None):
            raise ValueError("max_bytes must be at least 1 and needs size_of")
        self.capacity = capacity
        self.max_bytes = max_bytes
        self._size_of = size_of
        self._items: OrderedDict[K, V] = OrderedDict()
        self._sizes: dict[K, int] = {}
        self._bytes = 0
        self._lock = threading.Lock()
        self._build_locks = [threading.Lock() for _ in range(BUILD_STRIPES)]
        # keys rebuilt behind a reader served the held value: (the process building, the event set when done); a
        # forked child starts its own (the parent's thread did not come along)
        self._behind: dict[K, tuple[int, threading.Event]] = {}

    def get(self, key: K) -> V | None:
        with self._lock:
            value = self._items.get(key)
            if value is not None:
                self._items.move_to_end(key)
            return value

    def get_or_build(self, key: K, fresh: Callable[[V], bool], build: Callable[[], V],
                     stale_after: float | None = None, may_stand: Callable[[V], bool] | None = None) -> V:
        """The cached value while ``fresh(value)``, else ``build()`` stored under ``key``. Builds of one key are
        serialised (a thread that waited finds the other's fresh value); builds of other keys run side by side,
        so one tenant's long rebuild never holds up another's, nor one index another of the same tenant.

        With ``stale_after`` (seconds) and a held value that ``may_stand`` (None: any held value), the build runs
        in a thread of its own (or the one already running for ``key`` is joined), and the held value is returned
        when no fresh one is ready within ``stale_after``; the build goes on and stores its value for the next
        reader."""
        value = self.get(key)
        if value is not None and fresh(value):
            return value
        if stale_after is None or value is None or (may_stand is not None and not may_stand(value)):
            return self._build(key, fresh, build)
        if self._behind_build(key, fresh, build).wait(stale_after):
            newer = self.get(key)
            if newer is not None and fresh(newer):
                return newer
        return value

    def _build(self, key: K, fresh: Callable[[V], bool], build: Callable[[], V]) -> V:
        with self._build_locks[hash(key) % BUILD_STRIPES]:
            value = self.get(key)
            if value is not None and fresh(value):
                return value
            with serving_stale(None):  # what the build reads of other caches is current, as the value will be
                value = build()
            self.put(key, value)
            return value

    def _behind_build(self, key: K, fresh: Callable[[V], bool], build: Callable[[], V]) -> threading.Event:
        """The event set when the build of ``key`` running behind its readers ends; started here when none runs.
        A build that fails is logged: the held value stays, and the next reader starts another."""
        with self._lock:
            running = self._behind.get(key)
            if running is not None and running[0] == os.getpid():
                return running[1]
            done = threading.Event()
            self._behind[key] = (os.getpid(), done)

        def run() -> None:
            try:
                self._build(key, fresh, build)
            except Exception:  # noqa: BLE001 - the readers keep the held value; the next one builds again
                log.warning("rebuilding a cached index behind its readers failed", exc_info=True)
            finally:
                with self._lock:
                    self._behind.pop(key, None)
                done.set()

        threading.Thread(target=run, name="gf-rebuild-behind", daemon=True).start()
        return done

    def put(self, key: K, value: V) -> None:
        size = self._size_of(value) if self._size_of is not None else 0  # outside the lock: it may walk the value
        with self._lock:
            self._bytes += size - self._sizes.get(key, 0)
            self._sizes[key] = size
            self._items[key] = value
            self._items.move_to_end(key)
            while len(self._items) > 1 and self._over():
                old, _ = self._items.popitem(last=False)
                self._bytes -= self._sizes.pop(old)

    def _over(self) -> bool:
        return ((self.capacity is not None and len(self._items) > self.capacity)
                or (self.max_bytes is not None and self._bytes > self.max_bytes))

    @property
    def nbytes(self) -> int:
        """The sum of ``size_of`` over the entries held (0 without ``size_of``)."""
        with self._lock:
            return self._bytes

    def __contains__(self, key: object) -> bool:
        with self._lock:
            return key in self._items

    def __len__(self) -> int:
        with self._lock:
            return len(self._items)

    def __iter__(self) -> Iterator[K]:
        """Over a snapshot of the keys (safe while other threads write)."""
        with self._lock:
            return iter(list(self._items))

    def values(self) -> list[V]:
        """A snapshot of the values, without touching their recency."""
        with self._lock:
            return list(self._items.values())

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self._sizes.clear()
            self._bytes = 0
