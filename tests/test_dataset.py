"""Reading a dataset (tacl_scale.data.PretrainDataset) whose shards are damaged
and whose checksums are not verified (training's --no-verify-data, the default
for datasets over 20 GB; inspect without --verify): every value of an instance
that indexes something is checked as the instance is read, and a bad one is a
DatasetError naming the file and the instance, never an IndexError from numpy
or, worse, wrong segments or labels trained on."""

from __future__ import annotations

import json
import re
import shutil
import struct
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from conftest import ZH_TEXT, ZH_VOCAB, build_dataset

from tacl_scale.data import DatasetError, PretrainDataset
from tacl_scale.data.manifest import MANIFEST_NAME

BUILD = ("--input", str(ZH_TEXT), "--format", "text", "--language", "zh", "--tokenizer", str(ZH_VOCAB),
         "--min-doc-chars", "10", "--dupe-factor", "1", "--max-seq-len", "64")
SAID = ": the shard is corrupt (python -m data_prep.inspect DIR --verify checks it; rebuild the dataset)"


@pytest.fixture(scope="module")
def pairs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Sentence pairs with static masks and whole-word boundaries (every per-instance file)."""
    return build_dataset(tmp_path_factory.mktemp("pairs") / "ds", *BUILD, "--whole-word-masking")


@pytest.fixture(scope="module")
def single(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_dataset(tmp_path_factory.mktemp("single") / "ds", *BUILD, "--single-segment")


def damaged(source: Path, target: Path, damage: Callable[[Path], None]) -> Path:
    shutil.copytree(source, target)
    damage(target)
    return target


def first_masked(directory: Path) -> tuple[int, dict]:
    """The first instance of shard 0 with a masked position, and the instance."""
    ds = PretrainDataset(directory)
    return next((i, ds[i]) for i in range(len(ds)) if len(ds[i]["masked_positions"]))


def edit_meta(directory: Path, field: str, value: int) -> None:
    """Every row's ``field`` of shard 0's .meta.npy set to ``value`` (the same bytes long)."""
    path = directory / "shard-00000.meta.npy"
    meta = np.load(path)
    meta[field] = value
    np.save(path, meta)


def idx_entries(directory: Path, prefix: str) -> tuple[int, np.memmap, np.memmap]:
    """The sequence count, lengths and byte offsets of ``DIR/PREFIX.idx``, writable."""
    path = directory / f"{prefix}.idx"
    (count,) = struct.unpack_from("<Q", path.read_bytes(), 18)
    lengths = np.memmap(path, dtype=np.int32, mode="r+", offset=34, shape=(count,))
    pointers = np.memmap(path, dtype=np.int64, mode="r+", offset=34 + 4 * count, shape=(count,))
    return count, lengths, pointers


def refused(directory: Path, index: int) -> str:
    with pytest.raises(DatasetError) as info:
        PretrainDataset(directory)[index]
    return str(info.value)


def test_masked_positions_past_the_sequence_name_the_file_and_the_instance(pairs: Path, tmp_path: Path) -> None:
    """The audit's case: every masked position 60000. It was ``IndexError: index
    60000 is out of bounds for axis 0 with size 64`` from inspect and training."""
    index, item = first_masked(pairs)
    length = len(item["original_ids"])

    def overwrite(directory: Path) -> None:
        path = directory / "shard-00000.masked_positions.bin"
        path.write_bytes(b"\x60\xea" * (path.stat().st_size // 2))

    bad = damaged(pairs, tmp_path / "ds", overwrite)
    assert refused(bad, index) == (f"{bad / 'shard-00000.masked_positions.bin'}, instance {index}: masked position "
                                   f"60000 is past the sequence of {length} tokens{SAID}")


def test_fewer_placed_tokens_than_masked_positions_name_the_file_and_the_instance(pairs: Path,
                                                                                  tmp_path: Path) -> None:
    """One placed token for several masked positions went to all of them (numpy
    broadcasts it). Opening compared every instance's two lengths, two int32s per
    instance on every rank at every start; each instance is now checked as it is read."""
    ds = PretrainDataset(pairs)
    index = next(i for i in range(len(ds) - 1) if len(ds[i]["masked_positions"]) >= 2)
    masked = len(ds[index]["masked_positions"])

    def one_placed(directory: Path) -> None:
        _, lengths, _ = idx_entries(directory, "shard-00000.masked_tokens")
        lengths[index] = 1
        lengths.flush()

    bad = damaged(pairs, tmp_path / "ds", one_placed)
    assert refused(bad, index) == (f"{bad / 'shard-00000.masked_tokens.bin'}, instance {index}: 1 placed token(s) "
                                   f"for {masked} masked position(s){SAID}")
    assert PretrainDataset(bad)[index + 1]["input_ids"] is not None  # the other instances read as before


@pytest.mark.parametrize(("field", "value", "said"), [
    ("len_a", 65535, "len_a 65535, but a pair of segments of {n} tokens has at most {a} in segment A"),
    ("nsp_label", 7, "nsp_label 7, not 0 or 1"),
])
def test_a_meta_row_that_does_not_fit_its_instance_names_the_meta_file(pairs: Path, tmp_path: Path, field: str,
                                                                       value: int, said: str) -> None:
    """A segment A past the sequence gave every token segment 0 (no error, wrong
    training); an NSP label of 7 went to the loss as a class index."""
    length = len(PretrainDataset(pairs)[0]["original_ids"])
    bad = damaged(pairs, tmp_path / "ds", lambda d: edit_meta(d, field, value))
    assert refused(bad, 0) == (f"{bad / 'shard-00000.meta.npy'}, instance 0: "
                               f"{said.format(n=length, a=length - 3)}{SAID}")


def test_a_single_segments_len_a_must_cover_it(single: Path, tmp_path: Path) -> None:
    length = len(PretrainDataset(single)[0]["original_ids"])
    bad = damaged(single, tmp_path / "ds", lambda d: edit_meta(d, "len_a", 1))
    assert refused(bad, 0) == (f"{bad / 'shard-00000.meta.npy'}, instance 0: len_a 1, but a single segment of "
                               f"{length} tokens has {length - 2}{SAID}")


def test_an_instance_longer_than_the_manifest_says_names_the_tokens_file(pairs: Path, tmp_path: Path) -> None:
    """Longer than max_seq_len, an instance met the model's position embeddings as
    an index error on the device (the manifest's max_seq_len edited down here)."""
    ds = PretrainDataset(pairs)
    limit = max(ds.manifest.masking.max_predictions_per_seq, 3)
    index = next(i for i in range(len(ds)) if len(ds[i]["original_ids"]) > limit)
    length = len(ds[index]["original_ids"])

    def shorten(directory: Path) -> None:
        path = directory / MANIFEST_NAME
        path.write_text(json.dumps({**json.loads(path.read_text()), "max_seq_len": limit}))

    bad = damaged(pairs, tmp_path / "ds", shorten)
    assert refused(bad, index) == (f"{bad / 'shard-00000.bin'}, instance {index}: {length} tokens, but the "
                                   f"manifest's max_seq_len is {limit}{SAID}")


def test_word_starts_of_another_length_name_the_word_starts_file(pairs: Path, tmp_path: Path) -> None:
    """Whole-word dynamic masking indexes the tokens with them."""
    length = len(PretrainDataset(pairs)[0]["original_ids"])

    def one_short(directory: Path) -> None:
        _, lengths, _ = idx_entries(directory, "shard-00000.word_starts")
        lengths[0] -= 1
        lengths.flush()

    bad = damaged(pairs, tmp_path / "ds", one_short)
    assert refused(bad, 0) == (f"{bad / 'shard-00000.word_starts.bin'}, instance 0: {length - 1} word-start flags "
                               f"for {length} tokens{SAID}")


def test_an_idx_entry_outside_its_bin_names_the_idx_and_the_instance(pairs: Path, tmp_path: Path) -> None:
    """A negative offset read the sequence from the end of the file, silently."""

    def negative(directory: Path) -> None:
        _, _, pointers = idx_entries(directory, "shard-00000")
        pointers[1] = -8
        pointers.flush()

    bad = damaged(pairs, tmp_path / "ds", negative)
    message = refused(bad, 1)
    assert message.startswith(f"{bad / 'shard-00000.idx'}: sequence 1: ")
    assert message.endswith(f" (instance 1){SAID}")
    PretrainDataset(bad)[0]  # the others still read


def test_a_meta_file_of_another_layout_is_refused_when_opened(pairs: Path, tmp_path: Path) -> None:
    def floats(directory: Path) -> None:
        path = directory / "shard-00000.meta.npy"
        rows = len(np.load(path))
        np.save(path, np.zeros(rows, dtype=np.float32)[: rows * 3 // 4])  # 3 bytes a row, as before

    bad = damaged(pairs, tmp_path / "ds", floats)
    with pytest.raises(DatasetError, match=re.escape(f"{bad / 'shard-00000.meta.npy'}: holds float32 of shape ")):
        PretrainDataset(bad)


@pytest.mark.parametrize("seed", range(6))
def test_random_bytes_in_any_per_instance_file_are_only_ever_a_dataset_error(pairs: Path, tmp_path: Path,
                                                                            seed: int) -> None:
    """Bytes of a shard's per-instance files (the .idx entries after the header
    included) overwritten at random: opening and reading every instance either
    works or is a DatasetError, never another exception."""
    rng = np.random.default_rng(seed)
    suffixes = [".idx", ".masked_positions.bin", ".masked_positions.idx", ".masked_tokens.idx", ".meta.npy",
                ".word_starts.bin", ".word_starts.idx"]

    def scramble(directory: Path) -> None:
        for suffix in rng.choice(suffixes, size=2, replace=False):
            path = directory / f"shard-00000{suffix}"
            data = bytearray(path.read_bytes())
            first = 128 if suffix == ".meta.npy" else 34 if suffix.endswith(".idx") else 0  # past the header
            for _ in range(4):
                at = int(rng.integers(first, len(data)))
                span = data[at : at + int(rng.integers(1, 64))]
                data[at : at + len(span)] = rng.integers(0, 256, len(span), dtype=np.uint8).tobytes()
            path.write_bytes(bytes(data))

    bad = damaged(pairs, tmp_path / "ds", scramble)
    try:
        ds = PretrainDataset(bad)
    except DatasetError as err:  # refused as it opens: naming a file of the damaged shard
        assert str(bad / "shard-00000") in str(err)
        return
    errors = 0
    for index in range(len(ds)):
        try:
            ds[index]
        except DatasetError as err:
            assert str(err).endswith(SAID) and str(bad) in str(err)
            errors += 1
    assert errors < len(ds)  # a few instances damaged, not every one

