"""Megatron-LM's MMIDIDX indexed dataset format: a ``.bin`` of concatenated token
sequences and an ``.idx`` describing them, both memory-mapped by readers.

We write exactly the layout megatron-core's ``IndexedDataset`` reads
(``megatron/core/datasets/indexed_dataset.py``), so our shards open with the tools
of that ecosystem. The ``.idx`` file is, little-endian:

====================  =========================================================
bytes                 content
====================  =========================================================
9                     magic ``b"MMIDIDX\\x00\\x00"``
8  (``<Q``)           format version, 1
1  (``<B``)           dtype code (1 uint8, 2 int8, 3 int16, 4 int32, 5 int64,
                      6 float64, 7 float32, 8 uint16)
8  (``<Q``)           S = number of sequences
8  (``<Q``)           D = number of entries in the document index (documents + 1)
4·S (int32)           length of each sequence, in elements
8·S (int64)           byte offset of each sequence in the ``.bin``
8·D (int64)           document index: 0, then the end (exclusive) sequence index of
                      each document
====================  =========================================================

The ``.bin`` holds the sequences back to back in the dtype of the header.
"""

from __future__ import annotations

import mmap
import os
import struct
from pathlib import Path
from types import TracebackType
from typing import BinaryIO

import numpy as np

from .spilled import SpilledArray

INDEX_MAGIC = b"MMIDIDX\x00\x00"
INDEX_VERSION = 1
_HEADER_SIZE = len(INDEX_MAGIC) + 8 + 1 + 8 + 8

DTYPE_CODES: dict[int, type[np.generic]] = {
    1: np.uint8,
    2: np.int8,
    3: np.int16,
    4: np.int32,
    5: np.int64,
    6: np.float64,
    7: np.float32,
    8: np.uint16,
}
_CODE_OF_DTYPE = {np.dtype(v): k for k, v in DTYPE_CODES.items()}


class IndexedFormatError(ValueError):
    """An ``.idx``/``.bin`` pair is not a valid MMIDIDX dataset."""


def smallest_token_dtype(vocab_size: int) -> np.dtype:
    """The smallest of uint8, uint16 and int32 that holds every id of a vocabulary."""
    if vocab_size <= 1 << 8:
        return np.dtype(np.uint8)
    if vocab_size <= 1 << 16:
        return np.dtype(np.uint16)
    return np.dtype(np.int32)


def idx_path(prefix: str | os.PathLike) -> Path:
    """The index file of the MMIDIDX pair named ``prefix``."""
    return Path(f"{os.fspath(prefix)}.idx")


def bin_path(prefix: str | os.PathLike) -> Path:
    """The data file of the MMIDIDX pair named ``prefix``."""
    return Path(f"{os.fspath(prefix)}.bin")


class IndexedWriter:
    """Streams sequences into ``PREFIX.bin`` and writes ``PREFIX.idx`` on close.

    The per-sequence lengths and the document index are kept in
    :class:`~tacl_scale.data.spilled.SpilledArray` objects (a block in memory, the rest in
    unlinked scratch files beside the ``.bin``), so a shard of any size streams through
    in bounded memory; ``.idx`` is written from them at close, a block at a time. Use
    as a context manager; on an exception the partial files are removed so nothing
    half-written is left behind.
    """

    def __init__(self, prefix: str | os.PathLike, dtype: np.dtype | type) -> None:
        self.prefix = Path(prefix)
        self.dtype = np.dtype(dtype)
        if self.dtype not in _CODE_OF_DTYPE:
            raise ValueError(f"dtype {self.dtype} has no MMIDIDX code")
        self._range = np.iinfo(self.dtype) if self.dtype.kind in "ui" else None
        self._bin: BinaryIO | None = open(bin_path(prefix), "wb")
        self._lengths = SpilledArray(np.int32, self.prefix.parent)
        self._document_index = SpilledArray(np.int64, self.prefix.parent)
        self._document_index.append(0)

    def add(self, sequence: np.ndarray) -> None:
        """Append one sequence (cast to the writer's dtype)."""
        self._lengths.append(self._write(sequence))

    def _write(self, values: np.ndarray) -> int:
        """Range-check ``values``, append them to the ``.bin``; return their count."""
        array = np.asarray(values)
        if array.size and self._range is not None and (
            array.min() < self._range.min or array.max() > self._range.max
        ):
            raise ValueError(f"{self.prefix}: value outside the range of {self.dtype}")
        assert self._bin is not None, "writer is closed"
        self._bin.write(array.astype(self.dtype, copy=False).tobytes(order="C"))
        return int(array.size)

    def add_document(self, sequences: list[np.ndarray]) -> None:
        """Append the sequences of one document and close it: the same bytes as
        ``add`` for each and ``end_document``, with one range check and one write."""
        arrays = [np.asarray(sequence) for sequence in sequences]
        joined = np.concatenate(arrays) if arrays else np.zeros(0, dtype=self.dtype)
        self.add_joined_document(joined, [int(a.size) for a in arrays])

    def add_joined_document(self, values: np.ndarray, lengths: list[int]) -> None:
        """Append one document given as its sequences joined (``values``) and the
        length of each; the same bytes as :meth:`add_document` on the pieces."""
        if sum(lengths) != len(values):
            raise ValueError(f"{self.prefix}: lengths add up to {sum(lengths)}, not {len(values)} values")
        if lengths:
            self._write(values)
            self._lengths.extend(lengths)
        self.end_document()

    def end_document(self) -> None:
        """Close the current document: the sequences added since the last call."""
        self._document_index.append(len(self._lengths))

    @property
    def num_sequences(self) -> int:
        return len(self._lengths)

    def close(self) -> None:
        """Finish the ``.bin`` and write the ``.idx``."""
        if self._bin is None:
            return
        self._bin.close()
        self._bin = None
        with open(idx_path(self.prefix), "wb") as f:
            f.write(INDEX_MAGIC)
            f.write(struct.pack("<Q", INDEX_VERSION))
            f.write(struct.pack("<B", _CODE_OF_DTYPE[self.dtype]))
            f.write(struct.pack("<Q", len(self._lengths)))
            f.write(struct.pack("<Q", len(self._document_index)))
            for block in self._lengths.blocks():
                f.write(block.data)
            # The byte offsets a block at a time (a shard's writers hold over a
            # million sequences).
            before = 0  # elements in the sequences before this block
            for block in self._lengths.blocks():
                pointers = np.cumsum(block, dtype=np.int64)
                after = before + int(pointers[-1])
                pointers -= block  # each sequence's start within the block, in elements
                pointers += before
                pointers *= self.dtype.itemsize
                f.write(pointers.tobytes())
                before = after
            for block in self._document_index.blocks():
                f.write(block.data)
        self._lengths.close()
        self._document_index.close()

    def abort(self) -> None:
        """Drop the partial files."""
        if self._bin is not None:
            self._bin.close()
            self._bin = None
        self._lengths.close()
        self._document_index.close()
        for path in (bin_path(self.prefix), idx_path(self.prefix)):
            path.unlink(missing_ok=True)

    def __enter__(self) -> IndexedWriter:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()


def _map(path: Path) -> mmap.mmap | bytes:
    """Read-only memory map of a file (an empty file maps to empty bytes)."""
    with open(path, "rb") as f:
        if os.fstat(f.fileno()).st_size == 0:
            return b""
        return mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)


class IndexedReader:
    """Memory-maps an MMIDIDX ``.idx``/``.bin`` pair; opening costs O(1) memory.

    ``reader[i]`` is a read-only numpy view of sequence ``i`` (no copy).
    """

    def __init__(self, prefix: str | os.PathLike) -> None:
        self.prefix = Path(prefix)
        index_file, data_file = idx_path(prefix), bin_path(prefix)
        for path in (index_file, data_file):
            if not path.is_file():
                raise IndexedFormatError(f"{path}: missing")
        index_size = index_file.stat().st_size
        if index_size < _HEADER_SIZE:
            raise IndexedFormatError(f"{index_file}: truncated header ({index_size} bytes)")
        with open(index_file, "rb") as f:
            header = f.read(_HEADER_SIZE)
        if header[: len(INDEX_MAGIC)] != INDEX_MAGIC:
            raise IndexedFormatError(f"{index_file}: not an MMIDIDX index (bad magic)")
        offset = len(INDEX_MAGIC)
        (version,) = struct.unpack_from("<Q", header, offset)
        (code,) = struct.unpack_from("<B", header, offset + 8)
        num_sequences, num_doc_entries = struct.unpack_from("<QQ", header, offset + 9)
        if version != INDEX_VERSION:
            raise IndexedFormatError(f"{index_file}: unsupported version {version}")
        if code not in DTYPE_CODES:
            raise IndexedFormatError(f"{index_file}: unknown dtype code {code}")
        self.dtype = np.dtype(DTYPE_CODES[code])
        expected = _HEADER_SIZE + num_sequences * 12 + num_doc_entries * 8
        if index_size != expected:
            raise IndexedFormatError(
                f"{index_file}: size {index_size} bytes, header implies {expected}"
            )
        # Plain ndarrays over mmap (np.memmap's subclass overhead dominates the
        # millions of small slices a shard build or a data loader takes).
        self._index_mmap = _map(index_file)
        self.sequence_lengths = np.frombuffer(
            memoryview(self._index_mmap), dtype=np.int32, count=num_sequences, offset=_HEADER_SIZE
        )
        self.sequence_pointers = np.frombuffer(
            memoryview(self._index_mmap),
            dtype=np.int64,
            count=num_sequences,
            offset=_HEADER_SIZE + num_sequences * 4,
        )
        self.document_index = np.frombuffer(
            memoryview(self._index_mmap),
            dtype=np.int64,
            count=num_doc_entries,
            offset=_HEADER_SIZE + num_sequences * 12,
        )
        data_size = data_file.stat().st_size
        if num_sequences:
            end = int(self.sequence_pointers[-1]) + int(self.sequence_lengths[-1]) * self.dtype.itemsize
        else:
            end = 0
        if data_size != end:
            raise IndexedFormatError(f"{data_file}: size {data_size} bytes, index implies {end}")
        if num_doc_entries and (
            self.document_index[0] != 0 or self.document_index[-1] != num_sequences
        ):
            raise IndexedFormatError(
                f"{index_file}: document index runs {self.document_index[0]}..{self.document_index[-1]}, "
                f"expected 0..{num_sequences}"
            )
        self._data_mmap = _map(data_file)
        self._data = np.frombuffer(memoryview(self._data_mmap), dtype=self.dtype)
        self._size, self._itemsize = len(self._data), self.dtype.itemsize  # what each read is checked against

    def __len__(self) -> int:
        return len(self.sequence_lengths)

    def __getitem__(self, i: int) -> np.ndarray:
        if not -len(self) <= i < len(self):
            raise IndexError(f"sequence {i} out of range for {self.prefix} ({len(self)})")
        pointer, length = int(self.sequence_pointers[i]), int(self.sequence_lengths[i])
        start = pointer // self._itemsize
        stop = start + length
        # The .idx's entry checked against the .bin (opening checked only their sizes):
        # a damaged one would slice silently short, or from the end.
        if start < 0 or length < 0 or stop > self._size or start * self._itemsize != pointer:
            raise IndexedFormatError(
                f"{idx_path(self.prefix)}: sequence {i % len(self)}: {length} values at byte {pointer} do not "
                f"lie within {bin_path(self.prefix)} ({self._size * self._itemsize} bytes of {self.dtype})"
            )
        return self._data[start:stop]

    def span(self, first: int, last: int) -> np.ndarray:
        """Sequences ``first..last`` (inclusive) as one contiguous view."""
        start = int(self.sequence_pointers[first]) // self.dtype.itemsize
        stop = int(self.sequence_pointers[last]) // self.dtype.itemsize + int(self.sequence_lengths[last])
        return self._data[start:stop]

    @property
    def num_documents(self) -> int:
        return max(len(self.document_index) - 1, 0)

    @property
    def num_tokens(self) -> int:
        return int(self.sequence_lengths.sum(dtype=np.int64))
