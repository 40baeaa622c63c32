"""A read-only list of strings kept as one UTF-8 buffer and the end offset of each string.

A query index names hundreds of thousands of passages, entities and words. As Python objects (a ``str`` each and
a dict to find one) a cold worker decodes and files every one of them when it loads the index, and each costs an
object header and a dict entry; as a buffer, an offsets array and the permutation that sorts them, loading an
index snapshot is a copy of three arrays, a string is decoded when a query reads it, and one is found by binary
search over the sorted permutation (UTF-8 byte order is code point order, so the buffer is compared as bytes,
nothing decoded). Queries read a few dozen names each, so a search per name costs less than a dict built for
every load.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence

import numpy as np

_ERRORS = "surrogatepass"  # any Python string round-trips, lone surrogates included


class StringTable(Sequence[str]):
    __slots__ = ("_blob", "_ends", "_order")

    def __init__(self, blob: bytes, ends: np.ndarray, order: np.ndarray | None = None):
        """``blob``: the strings' UTF-8 bytes joined; ``ends``: each string's end offset in it; ``order``: the
        positions in ascending string order, or None when the strings are in that order already."""
        self._blob = blob
        self._ends = np.asarray(ends, dtype=np.int64)
        self._order = None if order is None else np.asarray(order, dtype=np.int64)
        n = len(self._ends)
        if n and (int(self._ends[-1]) != len(blob) or int(self._ends[0]) < 0 or bool(np.any(np.diff(self._ends) < 0))):
            raise ValueError("string offsets do not match their bytes")
        if self._order is not None and (self._order.shape != (n,) or (n and (
                int(self._order.min()) < 0 or int(self._order.max()) >= n))):
            raise ValueError("string order does not fit the strings")

    @classmethod
    def of(cls, items: Iterable[str]) -> StringTable:
        return cls.of_utf8([s.encode("utf-8", _ERRORS) for s in items])

    @classmethod
    def of_utf8(cls, encoded: list[bytes]) -> StringTable:
        """The table of strings given as their UTF-8 bytes (as Redis sends them: nothing decoded)."""
        ends = np.cumsum(np.fromiter(map(len, encoded), dtype=np.int64, count=len(encoded)))
        ordered = all(a <= b for a, b in zip(encoded, encoded[1:], strict=False))
        order = None if ordered else np.asarray(sorted(range(len(encoded)), key=encoded.__getitem__), dtype=np.int64)
        return cls(b"".join(encoded), ends, order)

    def __len__(self) -> int:
        return len(self._ends)

    def _bytes(self, i: int) -> bytes:
        start = int(self._ends[i - 1]) if i > 0 else 0
        return self._blob[start:int(self._ends[i])]

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        n = len(self._ends)
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError("string table index out of range")
        return self._bytes(i).decode("utf-8", _ERRORS)

    def __iter__(self) -> Iterator[str]:
        text, start = self._blob, 0
        for end in self._ends.tolist():
            yield text[start:end].decode("utf-8", _ERRORS)
            start = end

    def find(self, s: str) -> int:
        """The position of ``s`` (of one of them, when listed twice), or -1."""
        key = s.encode("utf-8", _ERRORS)
        order = self._order
        lo, hi = 0, len(self._ends)
        while lo < hi:
            mid = (lo + hi) // 2
            if self._bytes(int(order[mid]) if order is not None else mid) < key:
                lo = mid + 1
            else:
                hi = mid
        if lo < len(self._ends):
            at = int(order[lo]) if order is not None else lo
            if self._bytes(at) == key:
                return at
        return -1

    def __contains__(self, s: object) -> bool:
        return isinstance(s, str) and self.find(s) >= 0

    def __eq__(self, other: object) -> bool:
        if isinstance(other, StringTable):
            return self._blob == other._blob and np.array_equal(self._ends, other._ends)
        return isinstance(other, Sequence) and not isinstance(other, str) and list(self) == list(other)

    __hash__ = None  # mutable-looking equality: not a dict key

    def __repr__(self) -> str:
        return f"StringTable({len(self)} strings, {len(self._blob)} bytes)"

    @property
    def nbytes(self) -> int:
        return len(self._blob) + self._ends.nbytes + (0 if self._order is None else self._order.nbytes)

    def arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(the bytes, the end offsets, the sorting order: empty when the strings are sorted), as a snapshot
        stores them; ``from_arrays`` reads them back."""
        order = np.zeros(0, dtype=np.int64) if self._order is None else self._order
        return np.frombuffer(self._blob, dtype=np.uint8), self._ends, order

    @classmethod
    def from_arrays(cls, blob: np.ndarray, ends: np.ndarray, order: np.ndarray) -> StringTable:
        """``ValueError`` when they do not fit together (a damaged snapshot)."""
        return cls(blob.tobytes(), ends, None if order.size == 0 else order)

