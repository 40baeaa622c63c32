"""A vector collection's rows kept as the float16 blocks Redis returned, and scored in place.

The embedded store reads a tenant's collection as a few large blocks of float16 rows. Casting them into one
float32 matrix doubled what a query worker holds for them, and a cold worker's first query paid for that second
copy: at 100,000 passages the entities' matrix alone is 373 MB of memory the process touches for the first time
(docs/scaling.md, "A cold query worker's first query"). The blocks are kept instead, as read-only views of the
bytes ``GET`` returned, and scored with SimSIMD's float16 dot products (its AVX-512 FP16 and F16C kernels, chosen
at run time for the CPU), which run about as fast as numpy's float32 product over the cast matrix. Those scores
are approximate (the query is rounded to float16 and SimSIMD may accumulate in float16: a score moves by a few
1e-4), so they only choose the candidates: every row within ``RESCORE_MARGIN`` of the k-th best is scored again
exactly (its float16 values times the float32 query, in float32), and the hits and their scores are the ones a
float32 matrix would give.
"""

from __future__ import annotations

import numpy as np
import simsimd

DTYPE = np.float16
RESCORE_MARGIN = 0.01  # score units: 20x the float16 product's largest error seen on normalised 256-d vectors


class HalfRows:
    """Rows of ``dims`` float16 values in consecutive blocks (each a 2-D array; row ``i`` is in the block whose
    start is the last one at most ``i``)."""

    def __init__(self, blocks: list[np.ndarray], dims: int):
        self.blocks = [b for b in blocks if len(b)]
        self.dims = dims
        self.starts = np.cumsum([0, *(len(b) for b in self.blocks)])

    @classmethod
    def of_blocks(cls, blocks: list[bytes], rows: int, dims: int, per_block: int) -> HalfRows:
        """``rows`` rows from the blocks' bytes (``per_block`` rows each, the last one possibly shorter); rows a
        block does not reach (allocated, never written) are zeros."""
        out = []
        for number, data in enumerate(blocks):
            want = min(per_block, rows - number * per_block)
            if want <= 0:
                break
            block = np.frombuffer(data, dtype=DTYPE)
            have = min(len(block) // dims, want) if dims else 0
            block = block[: have * dims].reshape(have, dims)
            if have < want:
                block = np.concatenate([block, np.zeros((want - have, dims), dtype=DTYPE)])
            out.append(block)
        return cls(out, dims)

    def __len__(self) -> int:
        return int(self.starts[-1])

    def row(self, i: int) -> np.ndarray:
        """Row ``i`` as float32."""
        b = int(np.searchsorted(self.starts, i, side="right")) - 1
        if not 0 <= i < len(self):
            raise IndexError(i)
        return self.blocks[b][i - int(self.starts[b])].astype(np.float32)

    def scores(self, query: np.ndarray) -> np.ndarray:
        """Each row's dot product with ``query`` (``dims`` values), as float32."""
        q = np.ascontiguousarray(query, dtype=DTYPE)[None, :]
        out = np.empty((1, len(self)), dtype=np.float32)
        for start, block in zip(self.starts.tolist(), self.blocks, strict=False):
            simsimd.cdist(q, block, metric="dot", out=out[:, start : start + len(block)], out_dtype="float32")
        return out[0]

    def take(self, numbers: np.ndarray) -> np.ndarray:
        """Rows ``numbers`` (ascending) as a float32 matrix."""
        out = np.empty((len(numbers), self.dims), dtype=np.float32)
        cuts = np.searchsorted(numbers, self.starts)
        for b, block in enumerate(self.blocks):
            lo, hi = int(cuts[b]), int(cuts[b + 1])
            out[lo:hi] = block[numbers[lo:hi] - int(self.starts[b])]
        return out

    def candidates(self, query: np.ndarray, k: int, excluded: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(row numbers, their exact scores): every row that can be among the ``k`` best for ``query`` (a unit
        vector), none of ``excluded``; the exact scores are float32 products with the float32 query."""
        approx = self.scores(query)
        approx[excluded] = -np.inf
        k = min(k, len(approx))
        if k <= 0:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
        kth = np.partition(approx, len(approx) - k)[len(approx) - k]
        floor = kth - RESCORE_MARGIN if np.isfinite(kth) else -np.inf
        numbers = np.flatnonzero((approx >= floor) & np.isfinite(approx))
        return numbers, self.take(numbers) @ np.asarray(query, dtype=np.float32)
