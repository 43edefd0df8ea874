"""SpilledArray: append-only arrays that keep a block in memory and the rest in an
unlinked scratch file (the writers' per-sequence numbers)."""

from __future__ import annotations

import os
import tracemalloc

import numpy as np
import pytest

from tacl_scale.data.manifest import META_DTYPE
from tacl_scale.data.spilled import SpilledArray


@pytest.mark.parametrize("block", [1, 3, 64, 1 << 16])
def test_values_come_back_in_order_in_blocks(tmp_path, block):
    rng = np.random.default_rng(block)
    expected = rng.integers(-(1 << 31), 1 << 31, size=1000, dtype=np.int64).astype(np.int32)
    with SpilledArray(np.int32, tmp_path, block=block) as values:
        cut = 0
        for size in rng.integers(0, 40, size=100):  # appends of every size, across block edges
            values.extend(expected[cut : cut + size])
            cut += int(size)
            if cut >= len(expected) - 1:
                break
        for value in expected[cut:]:
            values.append(int(value))
        assert len(values) == len(expected)
        blocks = list(values.blocks())
        assert all(0 < len(b) <= block for b in blocks)
        assert np.array_equal(np.concatenate(blocks), expected)
        assert np.array_equal(np.concatenate(list(values.blocks())), expected)  # read again: the same
        assert list(tmp_path.iterdir()) == []  # the scratch file is unlinked
    assert len(values) == 0 and list(values.blocks()) == []


def test_memory_holds_one_block(tmp_path):
    """200,000 values (800 KB as int32) in blocks of 1,024: memory holds a block."""
    tracemalloc.start()
    try:
        values = SpilledArray(np.int32, tmp_path, block=1024)
        before = tracemalloc.get_traced_memory()[0]
        for _ in range(200):
            values.extend(np.arange(1000))
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert len(values) == 200_000
    assert held < 3 * 4 * 1024, f"{held} bytes held for 200,000 values"
    assert sum(len(b) for b in values.blocks()) == 200_000
    values.close()


def test_no_file_until_a_block_is_full(tmp_path):
    values = SpilledArray(np.int64, tmp_path, block=4)
    values.extend([1, 2, 3])
    assert values._file is None
    values.append(4)
    assert values._file is not None
    values.close()


@pytest.mark.parametrize("count", [0, 1, 5, 1000])
@pytest.mark.parametrize("block", [1, 7, 1 << 16])
def test_save_npy_writes_the_bytes_of_np_save(tmp_path, count, block):
    """The instance metadata's ``.npy``, written a block at a time, is the file
    ``np.save`` writes for the whole array (a structured dtype, the empty array too)."""
    rng = np.random.default_rng(count)
    meta = np.zeros(count, dtype=META_DTYPE)
    meta["len_a"] = rng.integers(0, 1 << 16, size=count)
    meta["nsp_label"] = rng.integers(0, 2, size=count)
    with SpilledArray(META_DTYPE, tmp_path, block=block) as values:
        for start in range(0, count, 3):
            values.extend([(int(m["len_a"]), bool(m["nsp_label"])) for m in meta[start : start + 3]])
        values.save_npy(tmp_path / "spilled.npy")
    np.save(tmp_path / "saved.npy", meta)
    assert (tmp_path / "spilled.npy").read_bytes() == (tmp_path / "saved.npy").read_bytes()
    assert np.array_equal(np.load(tmp_path / "spilled.npy"), meta)


def test_a_truncated_scratch_file_is_an_error_naming_its_directory(tmp_path):
    values = SpilledArray(np.int32, tmp_path, block=2)
    values.extend([1, 2, 3, 4, 5])
    assert values._file is not None
    values._file.flush()
    os.ftruncate(values._file.fileno(), 4)
    with pytest.raises(OSError, match=f"{tmp_path}: a scratch file of spilled values was cut short at byte 4 of 20"):
        list(values.blocks())
    values.close()


def test_block_must_be_positive():
    with pytest.raises(ValueError, match="block must be at least 1, not 0"):
        SpilledArray(np.int32, block=0)
