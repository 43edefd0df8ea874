"""Fused Triton kernels for the TaCL loss (semantics: :mod:`tacl_scale.kernels.tacl_loss`).

Layout (:mod:`tacl_scale.kernels.rows`): the masked student rows, normalised once
(``ŝ``, (M, D)), in blocks of up to ``BLOCK_M`` = 64 rows of one sequence; the
frozen teacher normalised once per step (``t̂``, one row per token, in its own
half dtype for the tensor cores).

- **Forward**, one program per row block: it streams its sequence's teacher rows in
  tiles of ``BLOCK_N`` columns, computes the similarity tile with ``tl.dot`` (fp32
  accumulation over ``BLOCK_D`` chunks of the hidden size; a 64-row tile is what
  Hopper's ``wgmma`` takes), keeps an online (max, sum-exp) as flash attention does,
  the target logit and the running argmax, and writes the scaled logits of the
  sequence's columns to an (M, max_len) fp32 buffer.
- **Backward**, one program per (row block, ``BLOCK_DOUT`` columns of D): it reads
  the logits back, forms ``p − 1[j=i]`` and accumulates ``g_ŝ = Σ_j (p_j − 1[j=i]) t̂_j / τ``
  with ``tl.dot``. The logits are computed once, in the forward: the buffer costs
  M·max_len·4 bytes (1.2 MiB at B=32, L=256), beside the (M, D) gradient.
- The gradient through the normalisation is PyTorch on the (M, D) rows.

Nothing waits for the GPU: sizes, offsets and blocks come from the
:class:`~tacl_scale.kernels.rows.MaskedRows` the collate built on the CPU, the
incoming gradient is read by the kernel from device memory, and counts stay on the
device. Loop bounds are compile-time constants: the hidden size, and
``NUM_TILES = cdiv(max_len, BLOCK_N)`` column tiles (at most 8 variants for L ≤ 512;
triton 3.6's interpreter cannot loop to a run-time bound), the tiles past a shorter
sequence's end masked.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
import triton
import triton.language as tl

from .rows import MaskedRows, packed_rows, padded_rows


@triton.jit
def _row_block(blk_seq_ptr, blk_start_ptr, blk_count_ptr, target_ptr, seq_start_ptr, seq_len_ptr, block,
               BLOCK_M: tl.constexpr):
    """A block's sequence (its first flat row and its column count), its masked
    rows (positions in the (M, ·) arrays), which of them exist, and their targets."""
    seq = tl.load(blk_seq_ptr + block)
    start = tl.load(blk_start_ptr + block)
    count = tl.load(blk_count_ptr + block)
    offs = tl.arange(0, BLOCK_M)
    row_ok = offs < count
    rows = start + offs
    target = tl.load(target_ptr + rows, mask=row_ok, other=-1)
    seq_start = tl.load(seq_start_ptr + seq)
    seq_len = tl.load(seq_len_ptr + seq)
    return seq_start, seq_len, rows, row_ok, target


@triton.jit
def _columns(valid_ptr, seq_start, seq_len, n0, BLOCK_N: tl.constexpr, HAS_VALID: tl.constexpr):
    """Columns ``n0 .. n0+BLOCK_N`` of a sequence and which are real tokens."""
    cols = n0 + tl.arange(0, BLOCK_N)
    col_ok = cols < seq_len
    if HAS_VALID:
        col_ok = col_ok & (tl.load(valid_ptr + seq_start + cols, mask=col_ok, other=0) != 0)
    return cols, col_ok


@triton.jit
def _tacl_forward(s_ptr, t_ptr, valid_ptr, target_ptr, blk_seq_ptr, blk_start_ptr, blk_count_ptr,
                  seq_start_ptr, seq_len_ptr, logits_ptr, lse_ptr, target_logit_ptr, correct_ptr,
                  inv_tau, stride_logits, D: tl.constexpr, NUM_TILES: tl.constexpr,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr,
                  HAS_VALID: tl.constexpr, IEEE: tl.constexpr):
    block = tl.program_id(0)
    seq_start, seq_len, rows, row_ok, target = _row_block(blk_seq_ptr, blk_start_ptr, blk_count_ptr, target_ptr,
                                                          seq_start_ptr, seq_len_ptr, block, BLOCK_M)
    m_i = tl.full((BLOCK_M,), float("-inf"), dtype=tl.float32)
    l_i = tl.zeros((BLOCK_M,), dtype=tl.float32)
    target_logit = tl.zeros((BLOCK_M,), dtype=tl.float32)
    best = tl.full((BLOCK_M,), float("-inf"), dtype=tl.float32)
    best_idx = tl.full((BLOCK_M,), -1, dtype=tl.int32)
    for tile in range(0, NUM_TILES):
        n0 = tile * BLOCK_N
        cols, col_ok = _columns(valid_ptr, seq_start, seq_len, n0, BLOCK_N, HAS_VALID)
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for d0 in range(0, D, BLOCK_D):
            d = d0 + tl.arange(0, BLOCK_D)
            d_ok = d < D
            s = tl.load(s_ptr + rows[:, None] * D + d[None, :], mask=row_ok[:, None] & d_ok[None, :], other=0.0)
            t = tl.load(t_ptr + (seq_start + cols[:, None]) * D + d[None, :],
                        mask=col_ok[:, None] & d_ok[None, :], other=0.0)
            if IEEE:
                acc += tl.dot(s, tl.trans(t), input_precision="ieee")
            else:
                acc += tl.dot(s, tl.trans(t))
        logits = tl.where(col_ok[None, :], acc * inv_tau, float("-inf"))
        tl.store(logits_ptr + rows[:, None] * stride_logits + cols[None, :], logits,
                 mask=row_ok[:, None] & (cols < seq_len)[None, :])
        tile_max = tl.max(logits, axis=1)
        m_new = tl.maximum(m_i, tile_max)
        # A tile with no real column leaves m at -inf: keep exp() finite.
        m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
        l_i = l_i * tl.exp(m_i - m_safe) + tl.sum(tl.exp(logits - m_safe[:, None]), axis=1)
        m_i = m_new
        target_logit += tl.sum(tl.where(cols[None, :] == target[:, None], logits, 0.0), axis=1)
        tile_arg = tl.argmax(logits, axis=1).to(tl.int32) + n0
        better = tile_max > best  # strict: the first maximum wins, as torch.argmax
        best_idx = tl.where(better, tile_arg, best_idx)
        best = tl.where(better, tile_max, best)
    tl.store(lse_ptr + rows, m_i + tl.log(l_i), mask=row_ok)
    tl.store(target_logit_ptr + rows, target_logit, mask=row_ok)
    tl.store(correct_ptr + rows, (best_idx == target).to(tl.int32), mask=row_ok)


@triton.jit
def _tacl_backward(t_ptr, valid_ptr, target_ptr, blk_seq_ptr, blk_start_ptr, blk_count_ptr,
                   seq_start_ptr, seq_len_ptr, logits_ptr, lse_ptr, grad_loss_ptr, grad_ptr, scale, stride_logits,
                   D: tl.constexpr, NUM_TILES: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                   BLOCK_DOUT: tl.constexpr, HAS_VALID: tl.constexpr, IEEE: tl.constexpr):
    block = tl.program_id(0)
    dout = tl.program_id(1) * BLOCK_DOUT + tl.arange(0, BLOCK_DOUT)
    dout_ok = dout < D
    seq_start, seq_len, rows, row_ok, target = _row_block(blk_seq_ptr, blk_start_ptr, blk_count_ptr, target_ptr,
                                                          seq_start_ptr, seq_len_ptr, block, BLOCK_M)
    lse = tl.load(lse_ptr + rows, mask=row_ok, other=0.0)
    grad = tl.zeros((BLOCK_M, BLOCK_DOUT), dtype=tl.float32)
    for tile in range(0, NUM_TILES):
        n0 = tile * BLOCK_N
        cols, col_ok = _columns(valid_ptr, seq_start, seq_len, n0, BLOCK_N, HAS_VALID)
        ok = row_ok[:, None] & col_ok[None, :]
        logits = tl.load(logits_ptr + rows[:, None] * stride_logits + cols[None, :], mask=ok, other=0.0)
        p = tl.where(ok, tl.exp(logits - lse[:, None]), 0.0)
        g = p - tl.where(ok & (cols[None, :] == target[:, None]), 1.0, 0.0)
        t = tl.load(t_ptr + (seq_start + cols[:, None]) * D + dout[None, :],
                    mask=col_ok[:, None] & dout_ok[None, :], other=0.0)
        if IEEE:
            grad += tl.dot(g.to(t.dtype), t, input_precision="ieee")
        else:
            grad += tl.dot(g.to(t.dtype), t)
    grad = grad * (tl.load(grad_loss_ptr) * scale)
    tl.store(grad_ptr + rows[:, None] * D + dout[None, :], grad, mask=row_ok[:, None] & dout_ok[None, :])


def block_sizes(dim: int, block_m: int) -> tuple[int, int, int, int]:
    """(BLOCK_M, BLOCK_N, BLOCK_D, BLOCK_DOUT): 64×64 tiles, the hidden size in
    chunks of 64 in the forward and of 128 in the backward, so the register tiles
    stay bounded for any D and L."""
    block_d = 64 if dim >= 64 else max(16, triton.next_power_of_2(dim))
    block_dout = 128 if dim >= 128 else block_d
    return block_m, 64, block_d, block_dout


class _Launch(NamedTuple):
    """What the forward decided that the backward launches with (``ctx.launch``)."""

    temperature: float
    eps: float
    shape: torch.Size  # the student's, which its gradient takes
    dtype: torch.dtype  # the student's
    block_m: int
    block_n: int
    block_dout: int
    num_tiles: int  # cdiv(max_len, block_n): the kernels' column-tile loop bound
    has_valid: bool  # a padded batch: ``valid`` marks each column's real tokens
    ieee: bool  # fp32 teacher: exact fp32 dot products, not TF32


class TaclTriton(torch.autograd.Function):
    """The loss on the flat layout of :class:`MaskedRows`: ``student``/``teacher``
    viewed as (N, D) rows, ``valid`` (N,) int32 or ``None`` (every column of a
    sequence a real token: packed batches)."""

    @staticmethod
    def forward(ctx, student, teacher, valid, rows: MaskedRows, temperature, eps):  # type: ignore[override]
        shape, dim = student.shape, student.shape[-1]
        count = rows.num_masked
        s_rows = student.reshape(-1, dim)[rows.index].float()
        norm = s_rows.norm(dim=-1)
        s_hat = s_rows / norm.clamp(min=eps)[:, None]
        t_dtype = teacher.dtype if teacher.dtype in (torch.float16, torch.bfloat16) else torch.float32
        if t_dtype == torch.bfloat16 and not teacher.is_cuda:
            t_dtype = torch.float32  # Triton's CPU interpreter computes bfloat16 wrongly
        t_hat = torch.nn.functional.normalize(teacher.reshape(-1, dim).float(), dim=-1, eps=eps)
        t_hat = t_hat.to(t_dtype).contiguous()
        s_in = s_hat.to(t_dtype).contiguous()
        sizes = block_sizes(dim, rows.block_m)
        block_m, block_n, block_d, _ = sizes
        num_tiles = triton.cdiv(rows.max_len, block_n)
        device = student.device
        logits = torch.empty((count, max(rows.max_len, 1)), dtype=torch.float32, device=device)
        lse = torch.empty(count, dtype=torch.float32, device=device)
        target_logit = torch.empty_like(lse)
        correct = torch.empty(count, dtype=torch.int32, device=device)
        has_valid = valid is not None
        valid = valid.to(torch.int32).contiguous() if has_valid else rows.seq_len  # unread without HAS_VALID
        ieee = t_dtype == torch.float32
        if count:
            _tacl_forward[(rows.num_blocks,)](
                s_in, t_hat, valid, rows.target, rows.block_seq, rows.block_start, rows.block_count,
                rows.seq_start, rows.seq_len, logits, lse, target_logit, correct, 1.0 / temperature,
                logits.stride(0), D=dim, NUM_TILES=num_tiles, BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_D=block_d, HAS_VALID=has_valid, IEEE=ieee,
            )
            loss = (lse - target_logit).sum() / count
        else:
            loss = student.new_zeros((), dtype=torch.float32)
        ctx.save_for_backward(t_hat, valid, logits, lse, s_hat, norm)
        ctx.rows = rows
        ctx.launch = _Launch(temperature, eps, shape, student.dtype, block_m, block_n, sizes[3], num_tiles, has_valid,
                             ieee)
        num_correct, num_masked = correct.sum(dtype=torch.int64), rows.count.clone()
        ctx.mark_non_differentiable(num_correct, num_masked)
        return loss, num_correct, num_masked

    @staticmethod
    def backward(ctx, grad_loss, _grad_correct, _grad_count):  # type: ignore[override]
        t_hat, valid, logits, lse, s_hat, norm = ctx.saved_tensors
        rows: MaskedRows = ctx.rows
        launch: _Launch = ctx.launch
        shape, eps = launch.shape, launch.eps
        dim = shape[-1]
        grad_student = torch.zeros((shape.numel() // dim, dim), dtype=launch.dtype, device=t_hat.device)
        count = rows.num_masked
        if count == 0:
            return grad_student.reshape(shape), None, None, None, None, None
        grad_hat = torch.empty((count, dim), dtype=torch.float32, device=t_hat.device)
        grid = (rows.num_blocks, triton.cdiv(dim, launch.block_dout))
        _tacl_backward[grid](
            t_hat, valid, rows.target, rows.block_seq, rows.block_start, rows.block_count, rows.seq_start,
            rows.seq_len, logits, lse, grad_loss.float().contiguous(), grad_hat, 1.0 / (launch.temperature * count),
            logits.stride(0), D=dim, NUM_TILES=launch.num_tiles, BLOCK_M=launch.block_m, BLOCK_N=launch.block_n,
            BLOCK_DOUT=launch.block_dout, HAS_VALID=launch.has_valid, IEEE=launch.ieee,
        )
        # Through ŝ = s / max(‖s‖, eps), as torch.nn.functional.normalize.
        clamped = norm < eps
        radial = (s_hat * grad_hat).sum(dim=-1, keepdim=True)
        grad_rows = torch.where(clamped[:, None], grad_hat / eps,
                                (grad_hat - s_hat * radial) / norm.clamp(min=eps)[:, None])
        grad_student.index_copy_(0, rows.index, grad_rows.to(launch.dtype))
        return grad_student.reshape(shape), None, None, None, None, None


def tacl_loss_triton(student, teacher, masked, attention_mask, temperature: float, eps: float,
                     rows: MaskedRows | None = None):
    """The fused-kernel TaCL loss on a padded batch (called by
    :func:`tacl_scale.kernels.tacl_loss.tacl_loss`, which checks the shapes): the
    reference's results. ``rows`` (from the collate) spares reading the masks on the host."""
    if rows is None:
        rows = padded_rows(masked, attention_mask)
    return TaclTriton.apply(student, teacher, attention_mask.reshape(-1), rows, temperature, eps)


def tacl_loss_triton_packed(student, teacher, masked, cu_seqlens, temperature: float, eps: float,
                            rows: MaskedRows | None = None):
    """The fused-kernel TaCL loss on the packed layout (see
    :func:`tacl_scale.kernels.tacl_loss.tacl_loss_packed`)."""
    if rows is None:
        rows = packed_rows(masked, cu_seqlens)
    return TaclTriton.apply(student, teacher, None, rows, temperature, eps)
