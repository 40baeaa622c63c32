"""A small thread-safe LRU map for per-process read caches (parsed rows, indexes) keyed by tenant.

Read caches only, never coordination: a miss rebuilds from Redis. Bounded so a process that serves
many tenants keeps only the most recently used ones.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterator
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")

CACHED_TENANTS = 32  # per process, for each per-tenant read cache


class LRU(Generic[K, V]):
    def __init__(self, capacity: int):
        if capacity < 1:
            raise ValueError("capacity must be at least 1")
        self.capacity = capacity
        self._items: OrderedDict[K, V] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: K) -> V | None:
        with self._lock:
            value = self._items.get(key)
            if value is not None:
                self._items.move_to_end(key)
            return value

    def get_or_build(self, key: K, fresh: Callable[[V], bool], build: Callable[[], V],
                     build_lock: threading.Lock) -> V:
        """The cached value while ``fresh(value)``, else ``build()`` stored under ``key``. Builds are
        serialised by ``build_lock``; a thread that waited for it finds the other's fresh value."""
        value = self.get(key)
        if value is not None and fresh(value):
            return value
        with build_lock:
            value = self.get(key)
            if value is not None and fresh(value):
                return value
            value = build()
            self.put(key, value)
            return value

    def put(self, key: K, value: V) -> None:
        with self._lock:
            self._items[key] = value
            self._items.move_to_end(key)
            while len(self._items) > self.capacity:
                self._items.popitem(last=False)

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
