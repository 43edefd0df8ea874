"""The TaCL token-level contrastive loss (paper Eq. 1, as stated in DESIGN.md).

With ``ŝ = s/‖s‖`` (student last hidden states) and ``t̂ = t/‖t‖`` (teacher, on
the unmasked input), for every masked position ``i`` of a sequence::

    loss_i = logsumexp_j(ŝ_i·t̂_j / τ) − ŝ_i·t̂_i / τ

where ``j`` runs over the real (non-padding) positions of the same sequence — padding
never enters the softmax, so the loss does not depend on how a batch is padded. The
loss is the mean of ``loss_i`` over the masked positions; the contrastive accuracy
counts the masked ``i`` whose argmax over ``j`` is ``i``.
"""

from __future__ import annotations

import importlib.util
import os

import torch
import torch.nn.functional as F

# Normalisation clamp: a zero vector is divided by this instead of by 0 (the
# convention of torch.nn.functional.normalize), so its similarities are all 0.
NORM_EPS = 1e-12


def tacl_loss_reference(
    student: torch.Tensor,
    teacher: torch.Tensor,
    masked: torch.Tensor,
    attention_mask: torch.Tensor,
    temperature: float = 0.01,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """PyTorch reference of the TaCL loss; see the module docstring.

    Memory-frugal: only the masked student rows are compared with their own
    sequence, packed per sequence into ``(B, K, D)`` with ``K`` the largest number
    of masked positions in a sequence, so the logits are ``(B, K, L)`` (about 15% of
    a ``B×L×L`` matrix), computed in float32 for fp32/fp16/bf16 inputs (float64
    for float64).
    """
    if student.shape != teacher.shape or student.dim() != 3:
        raise ValueError(f"student {tuple(student.shape)} and teacher {tuple(teacher.shape)} must both be (B, L, D)")
    real = attention_mask.bool()
    masked = masked.bool() & real
    batch, _, dim = student.shape
    counts = masked.sum(dim=1)
    num_masked = counts.sum()
    if int(num_masked) == 0:
        # 0, but still part of the graph, so backward() and the optimiser step work.
        zero = (student.float() * 0.0).sum()
        return zero, torch.zeros((), dtype=torch.long, device=student.device), num_masked
    # float32 accumulation for half inputs; float64 stays float64 (gradcheck).
    compute = torch.float64 if student.dtype == torch.float64 else torch.float32
    rows, positions = masked.nonzero(as_tuple=True)
    rank = (masked.cumsum(dim=1) - 1)[rows, positions]
    s_hat = F.normalize(student[rows, positions].to(compute), dim=-1, eps=NORM_EPS)
    with torch.no_grad():
        t_hat = F.normalize(teacher.to(compute), dim=-1, eps=NORM_EPS)
    packed = s_hat.new_zeros(batch, int(counts.max()), dim).index_put((rows, rank), s_hat)
    logits = torch.bmm(packed, t_hat.transpose(1, 2)) / temperature
    logits = logits.masked_fill(~real[:, None, :], float("-inf"))
    row_logits = logits[rows, rank]  # (M, L)
    target = row_logits.gather(1, positions[:, None]).squeeze(1)
    loss = (torch.logsumexp(row_logits, dim=-1) - target).mean()
    num_correct = (row_logits.argmax(dim=-1) == positions).sum()
    return loss, num_correct, num_masked


IMPLEMENTATIONS = ("auto", "torch", "triton")


def tacl_loss(
    student: torch.Tensor,
    teacher: torch.Tensor,
    masked: torch.Tensor,
    attention_mask: torch.Tensor,
    temperature: float = 0.01,
    impl: str = "auto",
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``loss, num_correct, num_masked`` of the TaCL objective.

    ``student``/``teacher``: (B, L, D) last hidden states (the teacher on the
    unmasked input; it gets no gradient). ``masked``: bool (B, L). ``attention_mask``:
    0/1 (B, L). ``loss`` is a float32 scalar (float64 for float64 inputs; 0 and still differentiable when nothing
    is masked); the counts are integer tensors. ``impl``: ``torch`` (reference),
    ``triton`` (fused kernel; on CPU tensors only under ``TRITON_INTERPRET=1``),
    ``auto`` (Triton on CUDA when available, else the reference).
    """
    if impl not in IMPLEMENTATIONS:
        raise ValueError(f"impl {impl!r} is not one of {IMPLEMENTATIONS}")
    if impl == "auto":
        impl = "triton" if student.is_cuda and triton_available() else "torch"
    if impl == "triton":
        if not triton_available():
            raise RuntimeError("impl='triton' needs the triton package")
        if not student.is_cuda and os.environ.get("TRITON_INTERPRET") != "1":
            raise RuntimeError("impl='triton' on CPU tensors needs TRITON_INTERPRET=1 (the Triton interpreter)")
        from .tacl_triton import tacl_loss_triton

        return tacl_loss_triton(student, teacher, masked, attention_mask, temperature)
    return tacl_loss_reference(student, teacher, masked, attention_mask, temperature)


def triton_available() -> bool:
    return importlib.util.find_spec("triton") is not None
