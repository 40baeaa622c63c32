"""The entities' neighbour lists as arrays: each entity's relations, heaviest first.

A query reads the relations of the entities it found, a hub's heaviest few (``GraphReader.relations_of``). Kept
as compressed rows (CSR) over the sorted entity names instead of a dict of Python lists: a tenant of 750,000
relations takes tens of MiB instead of hundreds, and the arrays are what an index snapshot stores, so a cold
query worker loads them instead of reading and filing every edge. Pure: built from (entity, entity, weight)
triples, it knows no store.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from shared.domain.retrieval.strings import StringTable

Ranked = list[tuple[float, tuple[str, str]]]  # (-weight, sorted pair), heaviest first


@dataclass
class EdgeIndex:
    names: StringTable  # every entity with a relation, sorted (an entity's number is its place here)
    indptr: np.ndarray  # the neighbours of entity i are neighbours[indptr[i]:indptr[i + 1]]
    neighbours: np.ndarray  # per entity heaviest first, ties in name order
    weights: np.ndarray  # the relation's weight, beside each neighbour

    @classmethod
    def build(cls, edges: Iterable[tuple[str, str, float]]) -> EdgeIndex:
        """``edges``: one (a, b, weight) per relation (either order; a relation listed twice keeps its last
        weight)."""
        pairs: dict[tuple[str, str], float] = {}
        for a, b, w in edges:
            pairs[(a, b) if a <= b else (b, a)] = float(w)
        names = sorted({x for pair in pairs for x in pair})
        index = {n: i for i, n in enumerate(names)}
        ends = np.fromiter((index[x] for pair in pairs for x in pair), dtype=np.int64, count=2 * len(pairs))
        return cls._of(names, ends.reshape(-1, 2), np.fromiter(pairs.values(), dtype=np.float64, count=len(pairs)))

    def updated(self, changes: dict[tuple[str, str], float | None]) -> EdgeIndex:
        """This index with ``changes`` applied: (a, b) -> the relation's weight now, or None when it is gone. The
        same index ``build`` gives for the relations it then holds; only the changed pairs are handled in Python."""
        if not changes:
            return self
        names = list(self.names)
        ends, w = self._pairs()
        at = {n: i for i, n in enumerate(names)}
        changed = np.fromiter((at.get(x, -1) for pair in changes for x in sorted(pair)), dtype=np.int64,
                              count=2 * len(changes)).reshape(-1, 2)
        changed = changed[(changed >= 0).all(axis=1)]  # a pair with a name not held was not a relation here
        width = max(len(names), 1)
        gone = np.isin(ends[:, 0] * width + ends[:, 1], changed[:, 0] * width + changed[:, 1])
        added = {tuple(sorted(pair)): float(weight) for pair, weight in changes.items() if weight is not None}
        every = sorted(at.keys() | {x for pair in added for x in pair})
        renumber = {n: i for i, n in enumerate(every)}
        old_to_new = np.fromiter((renumber[n] for n in names), dtype=np.int64, count=len(names))
        new_ends = np.fromiter((renumber[x] for pair in added for x in pair), dtype=np.int64, count=2 * len(added))
        ends = np.concatenate([old_to_new[ends[~gone]].reshape(-1, 2), new_ends.reshape(-1, 2)])
        w = np.concatenate([w[~gone], np.fromiter(added.values(), dtype=np.float64, count=len(added))])
        linked = np.zeros(len(every), dtype=bool)  # a name whose relations are all gone leaves the index
        linked[ends.ravel()] = True
        keep = np.cumsum(linked) - 1
        return EdgeIndex._of([n for n, on in zip(every, linked.tolist(), strict=True) if on], keep[ends], w)

    def _pairs(self) -> tuple[np.ndarray, np.ndarray]:
        """Each relation once, as (entity number, entity number) with the first not above the second, and its
        weight."""
        src = np.repeat(np.arange(len(self.names), dtype=np.int64), np.diff(self.indptr))
        dst = self.neighbours.astype(np.int64)
        once = src <= dst  # each relation is listed from both ends (a relation with itself once)
        return np.stack([src[once], dst[once]], axis=1), self.weights[once]

    @classmethod
    def _of(cls, names: list[str], ends: np.ndarray, w: np.ndarray) -> EdgeIndex:
        """The index of sorted ``names`` and the relations ``ends`` (pairs of name numbers) of weights ``w``."""
        loops = ends[:, 0] == ends[:, 1]  # a relation of an entity with itself is one arc, not two
        src = np.concatenate([ends[:, 0], ends[~loops, 1]])
        dst = np.concatenate([ends[:, 1], ends[~loops, 0]])
        ww = np.concatenate([w, w[~loops]])
        order = np.lexsort((dst, -ww, src))  # by entity, then heaviest first, then by the neighbour's name
        indptr = np.zeros(len(names) + 1, dtype=np.int64)
        np.cumsum(np.bincount(src, minlength=len(names)), out=indptr[1:])
        small = np.int32 if len(names) < 2**31 else np.int64
        return cls(StringTable.of(names), indptr, dst[order].astype(small), ww[order])

    def __len__(self) -> int:
        return len(self.names)

    @property
    def nbytes(self) -> int:
        arrays = self.indptr.nbytes + self.neighbours.nbytes + self.weights.nbytes
        return arrays + self.names.nbytes

    def neighbours_of(self, name: str) -> list[str]:
        """``name``'s neighbours, heaviest relation first (none for an unknown name)."""
        i = self.names.find(name)
        if i < 0:
            return []
        return [self.names[j] for j in self.neighbours[self.indptr[i]:self.indptr[i + 1]].tolist()]

    def ranked(self, name: str) -> Ranked:
        """``name``'s relations as (-weight, sorted pair), heaviest first, ties by pair: the order in which
        ``heapq.merge`` picks the heaviest relations of several entities."""
        i = self.names.find(name)
        if i < 0:
            return []
        lo, hi = self.indptr[i], self.indptr[i + 1]
        out = []
        for j, w in zip(self.neighbours[lo:hi].tolist(), self.weights[lo:hi].tolist(), strict=True):
            other = self.names[j]
            out.append((-w, (name, other) if name <= other else (other, name)))
        return out
