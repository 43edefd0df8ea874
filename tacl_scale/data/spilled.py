"""Append-only arrays that keep one block in memory and the rest in an unlinked
scratch file, for the per-sequence and per-document numbers a writer must hold until
it closes (MMIDIDX lengths and document index, a shard's instance metadata).

A shard's size is the user's choice (``--num-shards``), so anything a shard build
keeps per instance or per sentence grows with the corpus; spilled, it costs one
block of memory and a sequential read at close.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from typing import BinaryIO

import numpy as np
from numpy.typing import ArrayLike, DTypeLike

SPILL_BLOCK = 1 << 16  # values held in memory before they are written out


class SpilledArray:
    """An append-only array of one numpy dtype (plain or structured).

    Values are appended to a memory buffer; when it holds ``block`` values
    (:data:`SPILL_BLOCK` by default) it is written to a scratch file, created in
    ``directory`` (the system's temporary directory when None) on first need and
    unlinked at once, so it disappears when the array is closed or the process
    dies. Values are read back in order, a block at a time (:meth:`blocks`). Use
    :meth:`close` (or ``with``) to drop the file.
    """

    def __init__(self, dtype: DTypeLike, directory: str | os.PathLike | None = None,
                 block: int | None = None) -> None:
        block = SPILL_BLOCK if block is None else block
        if block < 1:
            raise ValueError(f"block must be at least 1, not {block}")
        self.dtype = np.dtype(dtype)
        self._directory = directory
        self._where = os.fspath(directory) if directory is not None else tempfile.gettempdir()  # for errors
        self._block_bytes = block * self.dtype.itemsize
        self._buffer = bytearray()
        self._file: BinaryIO | None = None
        self._spilled = 0  # bytes in the file

    def __len__(self) -> int:
        return (self._spilled + len(self._buffer)) // self.dtype.itemsize

    def append(self, value: object) -> None:
        """Append one value."""
        self.extend(np.array([value], dtype=self.dtype))

    def extend(self, values: ArrayLike) -> None:
        """Append ``values`` (cast to the array's dtype)."""
        self._buffer += np.asarray(values, dtype=self.dtype).tobytes()
        if len(self._buffer) >= self._block_bytes:
            self._spill()

    def _spill(self) -> None:
        if self._file is None:
            self._file = tempfile.TemporaryFile(dir=self._directory)
        self._file.write(self._buffer)
        self._spilled += len(self._buffer)
        self._buffer.clear()

    def blocks(self) -> Iterator[np.ndarray]:
        """Every value in order, as arrays of at most a block's values (copies)."""
        if self._file is not None:
            self._file.flush()
            fd = self._file.fileno()
            for offset in range(0, self._spilled, self._block_bytes):
                size = min(self._block_bytes, self._spilled - offset)
                data = os.pread(fd, size, offset)
                if len(data) != size:  # the scratch file was truncated under us
                    raise OSError(f"{self._where}: a scratch file of spilled values was cut short at byte {offset + len(data)} "
                                  f"of {self._spilled}")
                yield np.frombuffer(data, dtype=self.dtype)
        if self._buffer:
            yield np.frombuffer(bytes(self._buffer), dtype=self.dtype)

    def save_npy(self, path: str | os.PathLike) -> None:
        """Write the values to ``path`` as a one-dimensional ``.npy`` file: the bytes
        ``np.save`` writes for the same array, a block at a time."""
        header = {"descr": np.lib.format.dtype_to_descr(self.dtype), "fortran_order": False, "shape": (len(self),)}
        with open(path, "wb") as f:
            np.lib.format.write_array_header_1_0(f, header)
            for block in self.blocks():
                f.write(block.data)

    def close(self) -> None:
        """Drop the values and their scratch file."""
        if self._file is not None:
            self._file.close()
            self._file = None
        self._spilled = 0
        self._buffer.clear()

    def __enter__(self) -> SpilledArray:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
