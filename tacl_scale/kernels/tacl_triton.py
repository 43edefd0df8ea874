"""Fused Triton kernels for the TaCL loss (semantics: :mod:`tacl_scale.kernels.tacl_loss`).

The masked student rows are normalised once (``ŝ``, (M, D)) and the frozen teacher
once per step (``t̂``, one row per token, kept in its own dtype for the tensor cores). Rows
are grouped in blocks of ``BLOCK_M`` rows of one sequence; a program streams that
sequence's teacher tiles of ``BLOCK_N`` positions, computing the similarity tile
with ``tl.dot`` (fp32 accumulation over ``BLOCK_D`` chunks of the hidden size) and
keeping an online (max, sum-exp) as flash-attention does, plus the target logit and
the running argmax. Nothing of size M×L (let alone B×L×L) is stored: the forward
keeps the per-row log-sum-exp for the backward, which recomputes the probabilities
tile by tile and accumulates ``g_ŝ = Σ_j (p_j − 1[j=i]) t̂_j / τ`` for one chunk of
the hidden size per program. The gradient through the normalisation is done in
PyTorch on the (M, D) rows.
"""

from __future__ import annotations

import math

import torch
import triton
import triton.language as tl

from .tacl_loss import NORM_EPS


@triton.jit
def _similarity_tile(s_ptr, t_ptr, rows, row_ok, seq_start, cols, col_ok, D,
                     BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr,
                     IEEE: tl.constexpr):
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
    return acc


@triton.jit
def _row_block(blk_seq_ptr, blk_start_ptr, blk_count_ptr, target_ptr, seq_start_ptr, seq_len_ptr, block,
               BLOCK_M: tl.constexpr):
    """The sequence of a block (its first teacher row and its column count), the
    block's row indices, row validity and target positions."""
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
def _logits_tile(s_ptr, t_ptr, valid_ptr, rows, row_ok, seq_start, seq_len, n0, inv_tau, D,
                 BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr, IEEE: tl.constexpr):
    """Columns ``n0 .. n0+BLOCK_N`` of the sequence: their indices, whether they are
    real tokens, and the scaled similarity logits of the block's rows with them."""
    cols = n0 + tl.arange(0, BLOCK_N)
    in_seq = cols < seq_len
    real = tl.load(valid_ptr + seq_start + cols, mask=in_seq, other=0) != 0
    col_ok = in_seq & real
    logits = _similarity_tile(s_ptr, t_ptr, rows, row_ok, seq_start, cols, col_ok, D,
                              BLOCK_M, BLOCK_N, BLOCK_D, IEEE) * inv_tau
    return cols, col_ok, logits


@triton.jit
def _tacl_forward(s_ptr, t_ptr, valid_ptr, target_ptr, blk_seq_ptr, blk_start_ptr, blk_count_ptr,
                  seq_start_ptr, seq_len_ptr, lse_ptr, target_logit_ptr, correct_ptr, inv_tau, D,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr, IEEE: tl.constexpr):
    block = tl.program_id(0)
    seq_start, seq_len, rows, row_ok, target = _row_block(blk_seq_ptr, blk_start_ptr, blk_count_ptr, target_ptr,
                                                          seq_start_ptr, seq_len_ptr, block, BLOCK_M)
    m_i = tl.full((BLOCK_M,), float("-inf"), dtype=tl.float32)
    l_i = tl.zeros((BLOCK_M,), dtype=tl.float32)
    target_logit = tl.zeros((BLOCK_M,), dtype=tl.float32)
    best = tl.full((BLOCK_M,), float("-inf"), dtype=tl.float32)
    best_idx = tl.full((BLOCK_M,), -1, dtype=tl.int32)
    for n0 in range(0, seq_len, BLOCK_N):
        cols, col_ok, logits = _logits_tile(s_ptr, t_ptr, valid_ptr, rows, row_ok, seq_start, seq_len, n0,
                                            inv_tau, D, BLOCK_M, BLOCK_N, BLOCK_D, IEEE)
        logits = tl.where(col_ok[None, :], logits, float("-inf"))
        tile_max = tl.max(logits, axis=1)
        m_new = tl.maximum(m_i, tile_max)
        # A tile with no real column leaves m at -inf: keep exp() finite.
        m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
        l_i = l_i * tl.exp(m_i - m_safe) + tl.sum(tl.exp(logits - m_safe[:, None]), axis=1)
        m_i = m_new
        is_target = cols[None, :] == target[:, None]
        target_logit += tl.sum(tl.where(is_target, logits, 0.0), axis=1)
        tile_arg = tl.argmax(logits, axis=1).to(tl.int32) + n0
        better = tile_max > best  # strict: the first maximum wins, as torch.argmax
        best_idx = tl.where(better, tile_arg, best_idx)
        best = tl.where(better, tile_max, best)
    lse = m_i + tl.log(l_i)
    tl.store(lse_ptr + rows, lse, mask=row_ok)
    tl.store(target_logit_ptr + rows, target_logit, mask=row_ok)
    tl.store(correct_ptr + rows, (best_idx == target).to(tl.int32), mask=row_ok)


@triton.jit
def _tacl_backward(s_ptr, t_ptr, valid_ptr, target_ptr, blk_seq_ptr, blk_start_ptr, blk_count_ptr,
                   seq_start_ptr, seq_len_ptr, lse_ptr, grad_ptr, inv_tau, scale, D,
                   BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr,
                   BLOCK_DOUT: tl.constexpr, IEEE: tl.constexpr):
    block = tl.program_id(0)
    dout = tl.program_id(1) * BLOCK_DOUT + tl.arange(0, BLOCK_DOUT)
    dout_ok = dout < D
    seq_start, seq_len, rows, row_ok, target = _row_block(blk_seq_ptr, blk_start_ptr, blk_count_ptr, target_ptr,
                                                          seq_start_ptr, seq_len_ptr, block, BLOCK_M)
    lse = tl.load(lse_ptr + rows, mask=row_ok, other=0.0)
    grad = tl.zeros((BLOCK_M, BLOCK_DOUT), dtype=tl.float32)
    for n0 in range(0, seq_len, BLOCK_N):
        cols, col_ok, logits = _logits_tile(s_ptr, t_ptr, valid_ptr, rows, row_ok, seq_start, seq_len, n0,
                                            inv_tau, D, BLOCK_M, BLOCK_N, BLOCK_D, IEEE)
        p = tl.where(col_ok[None, :] & row_ok[:, None], tl.exp(logits - lse[:, None]), 0.0)
        g = p - tl.where(cols[None, :] == target[:, None], 1.0, 0.0)
        t = tl.load(t_ptr + (seq_start + cols[:, None]) * D + dout[None, :],
                    mask=col_ok[:, None] & dout_ok[None, :], other=0.0)
        if IEEE:
            grad += tl.dot(g.to(t.dtype), t, input_precision="ieee")
        else:
            grad += tl.dot(g.to(t.dtype), t)
    grad = grad * (inv_tau * scale)
    tl.store(grad_ptr + rows[:, None] * D + dout[None, :], grad, mask=row_ok[:, None] & dout_ok[None, :])


def block_sizes(length: int, dim: int) -> tuple[int, int, int, int]:
    """(BLOCK_M, BLOCK_N, BLOCK_D, BLOCK_DOUT) by shape: small tiles keep the
    register use bounded for D up to 1024 and L up to 512."""
    block_n = 64 if length >= 64 else 32
    block_d = 64 if dim >= 64 else 32
    return 16, block_n, block_d, block_d


def _blocks(counts: torch.Tensor, block_m: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Row blocks of one sequence each, from the masked-row count of every
    sequence: (sequence, first row, row count)."""
    per_seq = (counts + block_m - 1) // block_m
    seqs = torch.repeat_interleave(torch.arange(len(counts), device=counts.device), per_seq)
    first_block = torch.cumsum(per_seq, 0) - per_seq
    within = torch.arange(len(seqs), device=counts.device) - first_block[seqs]
    row_offset = torch.cumsum(counts, 0) - counts
    starts = row_offset[seqs] + within * block_m
    sizes = torch.clamp(counts[seqs] - within * block_m, max=block_m)
    return seqs.int().contiguous(), starts.int().contiguous(), sizes.int().contiguous()


class TaclTriton(torch.autograd.Function):
    """The loss on a flat layout that both batch layouts reduce to: ``N`` token rows
    (``student``/``teacher`` viewed as (N, D)), a validity flag per row, and per
    sequence its first row and its number of columns. Padded: sequence ``b`` is
    rows ``b·L ..`` with the attention mask as validity; packed: rows
    ``cu_seqlens[b] .. cu_seqlens[b+1]``, all valid."""

    @staticmethod
    def forward(ctx, student, teacher, masked, valid, seq_start, seq_len, temperature):  # type: ignore[override]
        shape, dim = student.shape, student.shape[-1]
        flat_student = student.reshape(-1, dim)
        masked = masked.reshape(-1).bool() & (valid != 0)
        index = masked.nonzero().squeeze(1)  # ascending: grouped by sequence
        seq_end = (seq_start + seq_len).long()
        seq = torch.searchsorted(seq_end, index, right=True)
        target = (index - seq_start.long()[seq]).to(torch.int32).contiguous()
        rows = flat_student[index].float()
        norm = rows.norm(dim=-1)
        s_hat = rows / norm.clamp(min=NORM_EPS)[:, None]
        t_dtype = teacher.dtype if teacher.dtype in (torch.float16, torch.bfloat16) else torch.float32
        if t_dtype == torch.bfloat16 and not teacher.is_cuda:
            t_dtype = torch.float32  # Triton's CPU interpreter computes bfloat16 wrongly
        t_hat = torch.nn.functional.normalize(teacher.reshape(-1, dim).float(), dim=-1, eps=NORM_EPS)
        t_hat = t_hat.to(t_dtype).contiguous()
        s_in = s_hat.to(t_dtype).contiguous()
        longest = int(seq_len.max()) if len(seq_len) else 0
        block_m, block_n, block_d, block_dout = block_sizes(longest, dim)
        counts = torch.bincount(seq, minlength=len(seq_len))
        blk_seq, blk_start, blk_count = _blocks(counts, block_m)
        count = len(index)
        lse = torch.empty(count, dtype=torch.float32, device=student.device)
        target_logit = torch.empty_like(lse)
        correct = torch.empty(count, dtype=torch.int32, device=student.device)
        valid = valid.to(torch.int32).contiguous()
        seq_start, seq_len = seq_start.to(torch.int32).contiguous(), seq_len.to(torch.int32).contiguous()
        ieee = t_dtype == torch.float32
        if count:
            _tacl_forward[(len(blk_seq),)](
                s_in, t_hat, valid, target, blk_seq, blk_start, blk_count, seq_start, seq_len,
                lse, target_logit, correct, 1.0 / temperature, dim,
                BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_D=block_d, IEEE=ieee,
            )
        loss = (lse - target_logit).mean() if count else student.new_zeros((), dtype=torch.float32)
        ctx.save_for_backward(s_in, t_hat, valid, target, blk_seq, blk_start, blk_count, seq_start, seq_len,
                              lse, s_hat, norm, index)
        ctx.meta = (temperature, shape, student.dtype, (block_m, block_n, block_d, block_dout), ieee)
        return loss, correct.sum().long(), torch.tensor(count, device=student.device)

    @staticmethod
    def backward(ctx, grad_loss, _grad_correct, _grad_count):  # type: ignore[override]
        (s_in, t_hat, valid, target, blk_seq, blk_start, blk_count, seq_start, seq_len,
         lse, s_hat, norm, index) = ctx.saved_tensors
        temperature, shape, dtype, (block_m, block_n, block_d, block_dout), ieee = ctx.meta
        dim = shape[-1]
        grad_student = torch.zeros((math.prod(shape[:-1]), dim), dtype=dtype, device=s_in.device)
        count = len(index)
        if count == 0:
            return grad_student.reshape(shape), None, None, None, None, None, None
        grad_hat = torch.empty((count, dim), dtype=torch.float32, device=s_in.device)
        grid = (len(blk_seq), triton.cdiv(dim, block_dout))
        _tacl_backward[grid](
            s_in, t_hat, valid, target, blk_seq, blk_start, blk_count, seq_start, seq_len, lse, grad_hat,
            1.0 / temperature, float(grad_loss) / count, dim,
            BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_D=block_d, BLOCK_DOUT=block_dout, IEEE=ieee,
        )
        # Through ŝ = s / max(‖s‖, eps), as torch.nn.functional.normalize.
        clamped = norm < NORM_EPS
        radial = (s_hat * grad_hat).sum(dim=-1, keepdim=True)
        grad_rows = torch.where(clamped[:, None], grad_hat / NORM_EPS,
                                (grad_hat - s_hat * radial) / norm.clamp(min=NORM_EPS)[:, None])
        grad_student[index] = grad_rows.to(dtype)
        return grad_student.reshape(shape), None, None, None, None, None, None


def tacl_loss_triton(student, teacher, masked, attention_mask, temperature=0.01):
    """The fused-kernel TaCL loss on a padded batch: same signature and results as
    the reference."""
    if student.shape != teacher.shape or student.dim() != 3:
        raise ValueError(f"student {tuple(student.shape)} and teacher {tuple(teacher.shape)} must both be (B, L, D)")
    batch, length, _ = student.shape
    real = attention_mask.bool()
    positions = torch.arange(length, device=student.device)
    # Columns past a sequence's last real token are never visited.
    seq_len = (torch.where(real, positions, -1).max(dim=1).values + 1).clamp(min=0)
    seq_start = torch.arange(batch, device=student.device) * length
    return TaclTriton.apply(student, teacher, masked, real.reshape(-1), seq_start, seq_len, temperature)


def tacl_loss_triton_packed(student, teacher, masked, cu_seqlens, temperature=0.01):
    """The fused-kernel TaCL loss on the packed layout (see
    :func:`tacl_scale.kernels.tacl_loss.tacl_loss_packed`)."""
    from .tacl_loss import _check_packed

    _check_packed(student, teacher, masked, cu_seqlens)
    valid = torch.ones(student.shape[0], dtype=torch.int32, device=student.device)
    seq_start = cu_seqlens[:-1]
    return TaclTriton.apply(student, teacher, masked, valid, seq_start, cu_seqlens[1:] - seq_start, temperature)
