"""The embedded store's float16 rows, scored in place: the hits and scores a float32 matrix of the same rows gives."""

import numpy as np
import pytest

from shared.infra.store.half_rows import DTYPE, HalfRows


def unit_rows(n: int, dims: int, seed: int = 0) -> np.ndarray:
    m = np.random.default_rng(seed).standard_normal((n, dims)).astype(np.float32)
    return (m / np.linalg.norm(m, axis=1, keepdims=True)).astype(DTYPE)


def as_blocks(m: np.ndarray, per_block: int) -> list[bytes]:
    return [m[i : i + per_block].tobytes() for i in range(0, len(m), per_block)]


def test_rows_read_across_blocks_with_an_unwritten_tail_as_zeros():
    m = unit_rows(10, 8)
    blocks = as_blocks(m[:9], 4)  # the tenth row allocated, never written: its block stops short
    rows = HalfRows.of_blocks(blocks, 10, 8, 4)
    assert len(rows) == 10 and rows.dims == 8
    assert np.array_equal(rows.row(5), m[5].astype(np.float32))
    assert not rows.row(9).any()
    assert np.array_equal(rows.take(np.array([0, 3, 4, 8, 9])), np.vstack([m[[0, 3, 4, 8]], np.zeros((1, 8))]))
    with pytest.raises(IndexError):
        rows.row(10)


@pytest.mark.parametrize("seed", range(5))
def test_candidates_hold_the_float32_top_k_with_exact_scores(seed):
    m = unit_rows(5000, 256, seed)
    rows = HalfRows.of_blocks(as_blocks(m, 1024), len(m), 256, 1024)
    query = m[7].astype(np.float32) + 0.3 * np.random.default_rng(seed + 100).standard_normal(256).astype(np.float32)
    query /= np.linalg.norm(query)
    excluded = np.array([7, 11])
    want = m.astype(np.float32) @ query
    want[excluded] = -np.inf
    numbers, scores = rows.candidates(query, 20, excluded)
    assert not set(numbers.tolist()) & {7, 11}
    best = numbers[np.argsort(-scores, kind="stable")[:20]]
    assert best.tolist() == np.argsort(-want, kind="stable")[:20].tolist()
    assert np.allclose(scores, want[numbers], atol=1e-6)
    # the approximate scores (float16 query, float16 products) are close, and only shortlist
    approx = rows.scores(query)
    assert np.abs(approx - m.astype(np.float32) @ query).max() < 2e-3


def test_no_rows_and_every_row_excluded():
    empty = HalfRows([], 0)
    assert len(empty) == 0
    rows = HalfRows([unit_rows(3, 4)], 4)
    numbers, scores = rows.candidates(np.ones(4, dtype=np.float32) / 2, 2, np.array([0, 1, 2]))
    assert numbers.size == 0 and scores.size == 0
