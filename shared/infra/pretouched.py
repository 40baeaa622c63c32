"""Memory a query worker touches before it consumes, handed out to the index loads of its cold queries.

A cold query worker reads a tenant's index snapshots and vector blocks into fresh buffers (``bulk_read``,
``index_snapshots``): about 530 MB at 100,000 passages. Where the host backs a virtual machine's memory only when
the guest first touches it, and takes freed pages back (the benchmark machine, a Firecracker microVM, does), every
fresh page costs a fault on the host, and the first query waits for them: on the benchmark VM, filling
530 MB took 1.4-2.2 s once the memory had been free for 10 s, against 0.05 s right after it was used
(docs/scaling.md, "A cold query worker's first query"). ``GRAPHFLEET_QUERY__PRETOUCH_MB`` reserves that much
memory when the worker starts, touched, and the loads take their buffers from it. A buffer's range returns to the
pool once no array views it any more, so the memory of an evicted tenant's indexes serves the next load still
touched (the process keeps it: the guest never frees it, the host never takes it back). A buffer the pool cannot
place is a plain ``np.empty``, as without the pool.

Hand-written because no allocator library hands out ranges of one mapping as numpy arrays released by their
garbage collection; it is first-fit over a sorted free list, which suits a few dozen buffers of megabytes each.
"""

from __future__ import annotations

import bisect
import logging
import mmap
import threading
import time
import weakref
from collections import deque

import numpy as np

log = logging.getLogger(__name__)
ALIGN = 64  # every buffer starts on a cache line, as numpy's own allocations do
PAGE = mmap.PAGESIZE
MIN_POOLED = 2**20  # smaller buffers are never taken from the pool (``buffer``)
MADV_POPULATE_WRITE = getattr(mmap, "MADV_POPULATE_WRITE", 23)  # Linux 5.14+; Python 3.11 may not name it


class TouchedPool:
    """``size`` bytes of anonymous memory, every page written once, handed out as uint8 arrays."""

    def __init__(self, size: int):
        self.size = size - size % ALIGN
        self._map = mmap.mmap(-1, self.size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
        self._starts: list[int] = [0]  # free ranges, sorted by start, never adjacent (merged when freed)
        self._lengths: list[int] = [self.size]
        self._lock = threading.Lock()
        self._returned: deque[tuple[int, int]] = deque()  # (start, length) of ranges whose arrays are gone
        self.touch_s = self._touch()

    def _touch(self) -> float:
        """Fault every page in now (the kernel's populate, else a write per page); seconds it took."""
        started = time.perf_counter()
        try:
            self._map.madvise(MADV_POPULATE_WRITE)
        except (OSError, ValueError):  # an older kernel: one write per page does the same from here
            np.frombuffer(self._map, dtype=np.uint8)[::PAGE] = 0
        return time.perf_counter() - started

    def free_bytes(self) -> int:
        with self._lock:
            self._merge_returned()
            return sum(self._lengths)

    def take(self, n: int) -> np.ndarray | None:
        """An array of ``n`` bytes from the pool (contents undefined), or None when no free range holds it."""
        need = max(-(-n // ALIGN) * ALIGN, ALIGN)
        with self._lock:
            self._merge_returned()
            at = next((i for i, length in enumerate(self._lengths) if length >= need), None)
            if at is None:
                return None
            start = self._starts[at]
            if self._lengths[at] == need:
                del self._starts[at], self._lengths[at]
            else:
                self._starts[at] += need
                self._lengths[at] -= need
        out = np.frombuffer(self._map, dtype=np.uint8, count=n, offset=start)
        weakref.finalize(out, self._returned.append, (start, need))  # views keep ``out``: it goes with the last
        return out

    def _merge_returned(self) -> None:
        """File the ranges whose arrays are gone back among the free ones (under the lock). Their finalizers only
        queue them: one can run in any thread, inside this lock too (a garbage collection started in ``take``)."""
        while self._returned:
            start, length = self._returned.popleft()
            at = bisect.bisect(self._starts, start)
            if at < len(self._starts) and start + length == self._starts[at]:  # joins the next free range
                length += self._lengths[at]
                del self._starts[at], self._lengths[at]
            if at > 0 and self._starts[at - 1] + self._lengths[at - 1] == start:  # and the one before
                self._lengths[at - 1] += length
            else:
                self._starts.insert(at, start)
                self._lengths.insert(at, length)


_pool: TouchedPool | None = None


def reserve(mb: int) -> float:
    """Make this process's pool of ``mb`` MiB (0: none); seconds spent touching it. Called once, before the worker
    consumes; a failure to map leaves the process without a pool (the loads use fresh memory, as before)."""
    global _pool
    if mb <= 0 or _pool is not None:
        return 0.0
    try:
        _pool = TouchedPool(mb * 2**20)
    except (OSError, ValueError):
        log.warning("could not reserve %d MiB of touched memory for index loads", mb, exc_info=True)
        return 0.0
    return _pool.touch_s


def buffer(n: int) -> np.ndarray:
    """``n`` bytes to read into (contents undefined): from the touched pool when there is room, else fresh. Under
    ``MIN_POOLED`` always fresh: malloc's heap serves those from memory the process has used before, and in the pool
    they would only cut up the ranges large loads need."""
    got = _pool.take(n) if _pool is not None and n >= MIN_POOLED else None
    return np.empty(n, dtype=np.uint8) if got is None else got
