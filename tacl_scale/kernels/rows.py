"""Where a batch's masked tokens are, in the form the TaCL kernels read it.

The fused loss (:mod:`tacl_scale.kernels.tacl_triton`) works on a flat view of a
batch: ``N`` token rows (a padded ``(B, L)`` batch seen as ``B·L`` rows, or the
``T`` rows of a packed one), sequences as ranges of rows, and the masked rows
grouped in blocks of at most :data:`BLOCK_M` rows of one sequence, one Triton
program each. :class:`MaskedRows` holds all of that. The collate builds it on the
CPU (:func:`masked_rows`, numpy), the batch carries it to the device, and the loss
then needs no host synchronisation: every size it launches with is a host integer
here, every index a device tensor.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Any

import numpy as np
import torch

# Masked rows per Triton program: a 64-row tile is the shape Hopper's wgmma takes.
BLOCK_M = 64


@dataclass(frozen=True)
class MaskedRows:
    """The masked rows of one batch and their row blocks. Tensors are int32 but for
    ``index`` (int64, it indexes the flat states) and ``count`` (int64, 0-d)."""

    index: torch.Tensor  # (M,) flat row of each masked token, ascending (so grouped by sequence)
    target: torch.Tensor  # (M,) the token's position in its sequence: the column of its positive
    seq_start: torch.Tensor  # (B,) flat row of each sequence's first token
    seq_len: torch.Tensor  # (B,) columns of each sequence: its real tokens (padded: up to the last one)
    block_seq: torch.Tensor  # (blocks,) the sequence of each row block
    block_start: torch.Tensor  # (blocks,) the block's first masked row (a position in ``index``)
    block_count: torch.Tensor  # (blocks,) its rows, 1 .. BLOCK_M
    count: torch.Tensor  # () M, on the device of the other tensors (the loss returns it)
    num_masked: int  # M, on the host
    max_len: int  # the longest sequence's columns, on the host
    block_m: int = BLOCK_M

    @property
    def num_blocks(self) -> int:
        return int(self.block_seq.shape[0])

    @property
    def device(self) -> torch.device:
        return self.index.device

    def _map(self, fn: Any) -> MaskedRows:
        return replace(self, **{f.name: fn(getattr(self, f.name)) for f in fields(self)
                                if isinstance(getattr(self, f.name), torch.Tensor)})

    def to(self, device: torch.device | str, non_blocking: bool = False) -> MaskedRows:
        """The same rows with every tensor on ``device``."""
        return self._map(lambda t: t.to(device, non_blocking=non_blocking))

    def pin_memory(self) -> MaskedRows:
        """Page-locked copies (the DataLoader calls this with ``pin_memory=True``), so
        that ``to(cuda, non_blocking=True)`` does not wait for the GPU."""
        return self._map(lambda t: t.pin_memory())


def masked_rows(index: np.ndarray, seq_start: np.ndarray, seq_len: np.ndarray,
                block_m: int = BLOCK_M) -> MaskedRows:
    """The rows of a batch from numpy arrays, on the CPU: ``index`` the flat rows of
    the masked tokens (ascending), ``seq_start``/``seq_len`` each sequence's first
    flat row and its number of columns (each sequence's rows contiguous, sequences
    in ascending order). Masked rows outside every sequence are an error."""
    index = np.asarray(index, dtype=np.int64)
    seq_start = np.asarray(seq_start, dtype=np.int64)
    seq_len = np.asarray(seq_len, dtype=np.int64)
    if len(index) and np.any(np.diff(index) <= 0):
        raise ValueError("masked rows must be strictly ascending")
    seq = np.searchsorted(seq_start, index, side="right") - 1
    target = index - seq_start[np.maximum(seq, 0)]
    if len(index) and (np.any(seq < 0) or np.any(target >= seq_len[seq])):
        raise ValueError("a masked row lies outside every sequence")
    counts = np.bincount(seq, minlength=len(seq_start))
    per_seq = -(-counts // block_m)
    block_seq = np.repeat(np.arange(len(seq_start)), per_seq)
    first_block = np.cumsum(per_seq) - per_seq
    within = np.arange(len(block_seq)) - first_block[block_seq]
    first_row = np.cumsum(counts) - counts
    block_start = first_row[block_seq] + within * block_m
    block_count = np.minimum(counts[block_seq] - within * block_m, block_m)

    def int32(values: np.ndarray) -> torch.Tensor:
        return torch.from_numpy(np.ascontiguousarray(values, dtype=np.int32))

    return MaskedRows(
        index=torch.from_numpy(index.copy()), target=int32(target), seq_start=int32(seq_start),
        seq_len=int32(seq_len), block_seq=int32(block_seq), block_start=int32(block_start),
        block_count=int32(block_count), count=torch.tensor(len(index), dtype=torch.int64),
        num_masked=len(index), max_len=int(seq_len.max()) if len(seq_len) else 0, block_m=block_m,
    )


def padded_rows(masked: torch.Tensor, attention_mask: torch.Tensor, block_m: int = BLOCK_M) -> MaskedRows:
    """:func:`masked_rows` of a padded ``(B, L)`` batch from its tensors (any device;
    read on the host). A sequence's columns run to its last real token; masked
    positions on padding are dropped, as the loss ignores them."""
    real = attention_mask.detach().bool().cpu().numpy()
    hits = (masked.detach().bool().cpu().numpy() & real).reshape(-1)
    batch, length = real.shape
    positions = np.arange(length)
    seq_len = np.where(real, positions + 1, 0).max(axis=1) if length else np.zeros(batch, dtype=np.int64)
    rows = masked_rows(np.flatnonzero(hits), np.arange(batch) * length, seq_len, block_m)
    return rows.to(masked.device)


def packed_rows(masked: torch.Tensor, cu_seqlens: torch.Tensor, block_m: int = BLOCK_M) -> MaskedRows:
    """:func:`masked_rows` of a packed batch (``masked`` (T,), offsets ``cu_seqlens``)
    from its tensors (any device; read on the host)."""
    cu = cu_seqlens.detach().cpu().numpy().astype(np.int64)
    rows = masked_rows(np.flatnonzero(masked.detach().bool().cpu().numpy()), cu[:-1], np.diff(cu), block_m)
    return rows.to(masked.device)
