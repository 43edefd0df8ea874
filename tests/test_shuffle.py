"""The global order: a keyed Feistel bijection per epoch (O(1) memory), the
micro-batch layout over ranks, and the sample digest."""

from __future__ import annotations

import numpy as np
import pytest

from tacl_scale.data.shuffle import (
    DIGEST_MODULUS,
    BatchLayout,
    BatchShapeError,
    FeistelPermutation,
    GlobalOrder,
    micro_batch_positions,
    sample_digest,
)


@pytest.mark.parametrize("size", [1, 2, 3, 4, 5, 7, 8, 9, 31, 64, 65, 100, 1000, 4097, 65_537])
def test_is_a_permutation_exhaustively(size: int) -> None:
    perm = FeistelPermutation(size, seed=11, epoch=2)
    out = perm(np.arange(size))
    assert np.array_equal(np.sort(out), np.arange(size))
    assert np.array_equal(perm.inverse(out), np.arange(size))


@pytest.mark.parametrize("size", [10**6, 10**7 + 3, 2**31 - 1, 10**9])
def test_is_a_bijection_by_sampling_at_scale(size: int) -> None:
    perm = FeistelPermutation(size, seed=5)
    positions = np.unique(np.random.default_rng(size).integers(0, size, 200_000))
    out = perm(positions)
    assert out.min() >= 0 and out.max() < size
    assert len(np.unique(out)) == len(positions)  # no two positions share an instance
    assert np.array_equal(perm.inverse(out), positions)


def test_depends_on_seed_and_epoch_and_looks_shuffled() -> None:
    n = 10_000
    base = FeistelPermutation(n, seed=1, epoch=0)(np.arange(n))
    assert np.array_equal(base, FeistelPermutation(n, seed=1, epoch=0)(np.arange(n)))
    for other in (FeistelPermutation(n, seed=2, epoch=0), FeistelPermutation(n, seed=1, epoch=1)):
        assert (other(np.arange(n)) != base).mean() > 0.99
    assert abs(np.corrcoef(np.arange(n), base)[0, 1]) < 0.05
    assert (base == np.arange(n)).mean() < 0.01  # few fixed points
    with pytest.raises(IndexError, match=rf"position {n} outside \[0, {n}\)"):
        FeistelPermutation(n, 1)(np.array([n]))
    with pytest.raises(ValueError, match="cannot permute 0 elements"):
        FeistelPermutation(0, 1)


def test_global_order_runs_epoch_after_epoch() -> None:
    order = GlobalOrder(7, seed=3)
    epochs, instances = order.instances(np.arange(21))
    assert epochs.tolist() == [0] * 7 + [1] * 7 + [2] * 7
    for e in range(3):
        assert sorted(instances[epochs == e].tolist()) == list(range(7))
    assert instances[:7].tolist() != instances[7:14].tolist()


@pytest.mark.parametrize(("world", "micro"), [(1, 8), (2, 2), (4, 2), (8, 1), (2, 4)])
def test_a_step_holds_the_same_positions_whatever_the_layout(world: int, micro: int) -> None:
    batch = 16
    positions = []
    for rank in range(world):
        stream = micro_batch_positions(BatchLayout(batch, micro, world, rank), consumed=32)
        mine = [next(stream) for _ in range(2 * BatchLayout(batch, micro, world, rank).accumulation)]
        positions += [p for _, ps in mine[: len(mine) // 2] for p in ps.tolist()]
        assert all(index == ps[0] // micro for index, ps in mine)
    assert sorted(positions) == list(range(32, 48))


def test_layout_refusals() -> None:
    with pytest.raises(BatchShapeError, match=r"global batch 10 is not micro-batch 4 × 1 rank\(s\) × a whole number "
                       r"of accumulation steps; --micro-batch-size must divide the per-rank batch 10: one of 1, 2, 5, 10"):
        BatchLayout(10, 4, 1, 0)
    with pytest.raises(BatchShapeError, match="no micro-batch fits: choose a --batch-size that 4 rank"):
        BatchLayout(10, 1, 4)
    with pytest.raises(BatchShapeError, match="micro-batch must be a positive integer, got 0"):
        BatchLayout(8, 0, 1)
    with pytest.raises(ValueError, match="rank"):
        BatchLayout(8, 2, 2, 2)
    with pytest.raises(ValueError, match="global batch"):
        next(micro_batch_positions(BatchLayout(8, 2, 2, 0), consumed=4))


def test_digests_of_rank_parts_add_up_to_the_batch_digest() -> None:
    keys = np.random.default_rng(0).integers(0, 10**12, 64)
    whole = sample_digest(keys)
    parts = sum(sample_digest(part) for part in np.split(keys, 4)) % DIGEST_MODULUS
    assert parts == whole == sample_digest(keys[::-1])
    assert sample_digest(keys[:-1]) != whole and sample_digest(np.append(keys[:-1], 7)) != whole


def test_the_batch_shape_owns_accumulation_and_the_sizes_that_fit() -> None:
    layout = BatchLayout(256, 8, 4)
    assert (layout.per_rank, layout.accumulation, layout.rank) == (64, 8, 0)
    assert BatchLayout.micro_batch_sizes(256, 8) == [1, 2, 4, 8, 16, 32]
    assert BatchLayout.micro_batch_sizes(12, 3) == [1, 2, 4]
    assert BatchLayout.micro_batch_sizes(10, 4) == []
