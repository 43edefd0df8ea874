"""Read a pre-training dataset built by ``data_prep`` (see :mod:`.manifest`)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np

from .indexed import IndexedFormatError, IndexedReader
from .manifest import (
    INDEXED_PARTS,
    MANIFEST_NAME,
    META_DTYPE,
    WORD_STARTS_PART,
    DatasetError,
    Manifest,
    ShardRecord,
    part_prefix,
    shard_file_names,
)

# What a per-instance error adds: the bytes of a shard disagree with its own index or
# with the manifest, which checksums catch when they are verified.
_CORRUPT = "the shard is corrupt (python -m data_prep.inspect DIR --verify checks it; rebuild the dataset)"


class _Shard:
    """The memory-mapped files of one shard, checked against the manifest."""

    def __init__(self, directory: Path, entry: ShardRecord) -> None:
        name = entry.name
        expected = shard_file_names(name, word_starts=entry.has_word_starts)
        for key, file_name in expected.items():
            path = directory / file_name
            if not path.is_file():
                raise DatasetError(f"{path}: missing (listed by {directory / MANIFEST_NAME})")
            recorded = entry.files.get(key)
            recorded_bytes = None if recorded is None else recorded.bytes
            if recorded_bytes is not None and path.stat().st_size != recorded_bytes:
                raise DatasetError(
                    f"{path}: {path.stat().st_size} bytes, manifest records {recorded_bytes}"
                )
        try:
            self.tokens, self.masked_positions, self.masked_tokens = (
                IndexedReader(directory / part_prefix(name, part)) for part in INDEXED_PARTS)
            self.word_starts = (IndexedReader(directory / part_prefix(name, WORD_STARTS_PART))
                                if entry.has_word_starts else None)
        except IndexedFormatError as err:
            raise DatasetError(str(err)) from err
        meta_path = directory / expected["meta"]
        try:
            self.meta = np.load(meta_path, mmap_mode="r")
        except (OSError, ValueError) as err:
            raise DatasetError(f"{meta_path}: unreadable: {err}") from err
        if self.meta.ndim != 1 or self.meta.dtype != np.dtype(META_DTYPE):
            raise DatasetError(f"{meta_path}: holds {self.meta.dtype} of shape {self.meta.shape}, not one row "
                               f"{np.dtype(META_DTYPE)} per instance")
        count = entry.counts.instances
        for what, size in (
            (expected["tokens_idx"], len(self.tokens)),
            (expected["masked_positions_idx"], len(self.masked_positions)),
            (expected["masked_tokens_idx"], len(self.masked_tokens)),
            (expected["meta"], len(self.meta)),
        ):
            if size != count:
                raise DatasetError(
                    f"{directory / what}: {size} instances, manifest records {count}"
                )
        # Each instance's masked positions and placed tokens are compared as it is read
        # (PretrainDataset.__getitem__): comparing all of them here read two int32s per
        # instance on every rank at every start (4 GB at 500 million instances).

    def __len__(self) -> int:
        return len(self.tokens)


class PretrainDataset:
    """Random access to every instance of a dataset directory.

    Opening memory-maps the shard files and reads only their headers, so it takes
    O(1) memory and time in the dataset's size (O(number of shards)). ``ds[i]`` is a
    dict of 1-D numpy arrays / ints:

    - ``original_ids``: unmasked ``[CLS] A [SEP] B [SEP]`` (int64)
    - ``input_ids``: the same with the static masks applied (int64)
    - ``token_type_ids``: 0 over ``[CLS] A [SEP]``, 1 over ``B [SEP]`` (int64)
    - ``masked_positions``: sorted positions to predict (int64)
    - ``nsp_label``: 0 = B follows A, 1 = B is random (HF convention)
    - ``word_starts`` (datasets built with whole-word masking): bool, True where a
      token starts a word

    ``split`` is ``"train"`` (default) or ``"validation"`` (a dataset built with
    ``--validation-fraction``; its documents never appear in the training split).

    Each instance is checked as it is read, in O(1) work (docs/design.md, "Reading
    instance *i*"): a value that does not fit its instance (a masked position past
    it, a segment boundary, an NSP label, word starts of another length, an
    ``.idx`` entry outside its ``.bin``) is a :class:`DatasetError` naming the file
    and the instance, as a shard damaged since its checksums were last verified
    gives.
    """

    def __init__(self, path: str | os.PathLike, split: str = "train") -> None:
        self.path = Path(path)
        self.split = split
        self.manifest = Manifest.load(self.path)
        records = self.manifest.split(split, self.path)
        expected = records.totals.instances
        self._shards = [_Shard(self.path, entry) for entry in records.shards]
        # What every instance is checked against as it is read (:meth:`__getitem__`).
        self._max_len = self.manifest.max_seq_len
        self._pairs = self.manifest.instance_kind == "pairs"
        self._names = [entry.name for entry in records.shards]
        sizes = np.array([len(s) for s in self._shards], dtype=np.int64)
        self._offsets = np.concatenate([[0], np.cumsum(sizes)])
        total = int(self._offsets[-1])
        if total != expected:
            raise DatasetError(
                f"{self.path / MANIFEST_NAME}: {split} instances {expected} but its shards hold {total}"
            )

    def __len__(self) -> int:
        return int(self._offsets[-1])

    def source_documents(self) -> np.ndarray:
        """For every instance, the number (within this split) of the source document
        its segment A comes from (MMIDIDX documents are source articles)."""
        numbers, first = [], 0
        for shard in self._shards:
            per_document = np.diff(shard.tokens.document_index)
            numbers.append(np.repeat(np.arange(first, first + len(per_document)), per_document))
            first += len(per_document)
        return np.concatenate(numbers) if numbers else np.zeros(0, dtype=np.int64)

    def locate(self, index: int) -> tuple[int, int]:
        """(shard number, index within the shard) of global instance ``index``."""
        if not 0 <= index < len(self):
            raise IndexError(f"instance {index} out of range for {self.path} ({len(self)})")
        shard = int(np.searchsorted(self._offsets, index, side="right")) - 1
        return shard, index - int(self._offsets[shard])

    def describe(self, index: int) -> str:
        """Where instance ``index`` is stored: ``DIR/shard-NNNNN.bin, instance K``."""
        shard_no, local = self.locate(index)
        return f"{self.path / self._names[shard_no]}.bin, instance {local}"

    def __getitem__(self, index: int) -> dict[str, Any]:
        if index < 0:
            index += len(self)
        shard_no, local = self.locate(index)
        shard = self._shards[shard_no]
        try:
            original = shard.tokens[local].astype(np.int64)
            positions = shard.masked_positions[local].astype(np.int64)
            placed = shard.masked_tokens[local]
            word_starts = None if shard.word_starts is None else shard.word_starts[local]
        except IndexedFormatError as err:  # its .idx entry points outside its .bin
            raise DatasetError(f"{err} (instance {local}): {_CORRUPT}") from err
        meta = shard.meta[local]
        len_a, nsp_label = int(meta["len_a"]), int(meta["nsp_label"])
        # Every value read above that indexes something is checked here, in O(1)
        # Python operations (the masked positions by the assignment below, which
        # refuses one past the sequence): a corrupt shard read with its checksums
        # unverified is a DatasetError naming the file and the instance, never an
        # IndexError or, worse, wrong segments or labels trained on.
        length = len(original)
        segments = length - len_a  # [CLS] [SEP] (single segment); [CLS] [SEP] B [SEP] (pairs)
        if (length > self._max_len or nsp_label > 1 or (segments < 3 if self._pairs else segments != 2)
                or (word_starts is not None and len(word_starts) != length) or len(placed) != len(positions)):
            raise self._damaged(shard_no, local, original, positions, len_a, nsp_label, word_starts, placed)
        input_ids = original.copy()
        try:
            input_ids[positions] = placed
        except IndexError:  # a masked position past the sequence
            raise self._damaged(shard_no, local, original, positions, len_a, nsp_label, word_starts,
                                placed) from None
        token_type_ids = np.zeros_like(original)
        token_type_ids[len_a + 2 :] = 1
        item = {
            "original_ids": original,
            "input_ids": input_ids,
            "token_type_ids": token_type_ids,
            "masked_positions": positions,
            "nsp_label": nsp_label,
        }
        if word_starts is not None:
            item["word_starts"] = word_starts.astype(bool)
        return item

    def _damaged(self, shard_no: int, local: int, original: np.ndarray, positions: np.ndarray, len_a: int,
                 nsp_label: int, word_starts: np.ndarray | None, placed: np.ndarray) -> DatasetError:
        """The error for instance ``local`` of shard ``shard_no`` whose stored values
        do not fit together (:meth:`__getitem__` found that one does not): the
        first problem, naming the file that holds the bad value."""
        prefix = self.path / self._names[shard_no]
        length = len(original)
        if length > self._max_len:
            where, problem = f"{prefix}.bin", f"{length} tokens, but the manifest's max_seq_len is {self._max_len}"
        elif nsp_label > 1:
            where, problem = f"{prefix}.meta.npy", f"nsp_label {nsp_label}, not 0 or 1"
        elif self._pairs and length - len_a < 3:
            where, problem = f"{prefix}.meta.npy", (f"len_a {len_a}, but a pair of segments of {length} tokens "
                                                    f"has at most {length - 3} in segment A")
        elif not self._pairs and length - len_a != 2:
            where, problem = f"{prefix}.meta.npy", (f"len_a {len_a}, but a single segment of {length} tokens "
                                                    f"has {length - 2}")
        elif word_starts is not None and len(word_starts) != length:
            where, problem = f"{prefix}.word_starts.bin", f"{len(word_starts)} word-start flags for {length} tokens"
        elif len(placed) != len(positions):  # one token would have gone to every masked position
            where, problem = (f"{prefix}.masked_tokens.bin",
                              f"{len(placed)} placed token(s) for {len(positions)} masked position(s)")
        else:
            past = positions[positions >= length]
            where, problem = f"{prefix}.masked_positions.bin", (
                f"masked position {int(past[0]) if past.size else '?'} is past the sequence of {length} tokens")
        return DatasetError(f"{where}, instance {local}: {problem}: {_CORRUPT}")
