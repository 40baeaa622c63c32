"""Sequences whose items are made when first read: a context section's candidate rows, their cells, their
evidence and their token estimates.

The allocator reads a section's rows in order only as far as its budget reaches, and keeps the evidence of the
rows it keeps. Under the evidence split the passages come first and often fill the context, so a graph section's
hundreds of candidate rows are never read: rendering each to CSV, estimating its tokens and building its
evidence up front was a large share of a local context's build, spent on rows nobody reads.
Hand-written: a ``Sequence`` with a memo is a few lines, and ``functools.cache`` on a closure would not support
the item replacement a shortened row needs (its evidence quotes the shortened text)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import TypeVar, overload

T = TypeVar("T")


def _position(i: int, n: int) -> int:
    """Index ``i`` (negative from the end) of a sequence of ``n`` items, or IndexError."""
    j = i + n if i < 0 else i
    if not 0 <= j < n:
        raise IndexError(i)
    return j


class LazyList(Sequence[T]):
    """``n`` items, item ``i`` made by ``make(i)`` on first read and kept; an item can be replaced."""

    def __init__(self, n: int, make: Callable[[int], T]):
        self._n, self._make, self._items = n, make, {}

    def __len__(self) -> int:
        return self._n

    @overload
    def __getitem__(self, i: int) -> T: ...

    @overload
    def __getitem__(self, i: slice) -> list[T]: ...

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(self._n))]
        j = _position(i, self._n)
        if j not in self._items:
            self._items[j] = self._make(j)
        return self._items[j]

    def __setitem__(self, i: int, value: T) -> None:
        self._items[_position(i, self._n)] = value

    def made(self) -> int:
        """How many items were made or set (what the laziness saved is ``len(self) - made()``)."""
        return len(self._items)


class BatchedCounts(Sequence[int]):
    """``n`` per-row counts computed by ``count(start, stop)`` in growing batches (16, 32, 64...) as they are
    read in order: counting in a batch is cheaper per row than one at a time, and a section that fills after a
    few rows never counts the candidates behind them."""

    FIRST_BATCH = 16

    def __init__(self, n: int, count: Callable[[int, int], list[int]]):
        self._n, self._count, self._done, self._size = n, count, [], self.FIRST_BATCH

    def __len__(self) -> int:
        return self._n

    def _upto(self, stop: int) -> None:
        while len(self._done) < min(stop, self._n):
            start = len(self._done)
            self._done.extend(self._count(start, min(self._n, start + self._size)))
            self._size *= 2

    def __iter__(self) -> Iterator[int]:
        for i in range(self._n):
            self._upto(i + 1)
            yield self._done[i]

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(self._n))]
        j = _position(i, self._n)
        self._upto(j + 1)
        return self._done[j]

    def counted(self) -> int:
        return len(self._done)


def lazy_map(items: Sequence, make: Callable[[int, object], T]) -> LazyList[T]:
    """``make(i, items[i])`` for each item, made when read."""
    return LazyList(len(items), lambda i: make(i, items[i]))


__all__ = ["BatchedCounts", "LazyList", "lazy_map"]
