"""The TaCL token-level contrastive loss (paper Eq. 1; docs/design.md, "The TaCL loss").

With ``ŝ = s/‖s‖`` (student last hidden states) and ``t̂ = t/‖t‖`` (teacher, on
the unmasked input), for every masked position ``i`` of a sequence::

    loss_i = logsumexp_j(ŝ_i·t̂_j / τ) − ŝ_i·t̂_i / τ

where ``j`` runs over the real (non-padding) positions of the same sequence — padding
never enters the softmax, so the loss does not depend on how a batch is padded. The
loss is the mean of ``loss_i`` over the masked positions; the contrastive accuracy
counts the masked ``i`` whose argmax over ``j`` is ``i``.

``padding_negatives=True`` reproduces the paper's released code instead
(``label_smoothed_nll_loss`` of yxuansu/TaCL ``pretraining/bert_contrastive.py``):
``j`` runs over all ``L`` columns of the padded batch, so the teacher's states at
padding positions are negatives too. Only the padded layout has such columns.

Two layouts of the same batch: **padded** (``(B, L, D)`` states with a ``(B, L)``
attention mask; :func:`tacl_loss`) and **packed** (the real tokens of all sequences
back to back, ``(T, D)`` states with per-sequence offsets ``cu_seqlens``, as an
unpadded encoder produces them; :func:`tacl_loss_packed`). Both give the same loss.
"""

from __future__ import annotations

import importlib.util

import torch
import torch.nn.functional as F

from .rows import MaskedRows

# Normalisation clamp: a zero vector is divided by this instead of by 0 (the
# convention of torch.nn.functional.normalize), so its similarities are all 0.
NORM_EPS = 1e-12


def tacl_loss_reference(
    student: torch.Tensor,
    teacher: torch.Tensor,
    masked: torch.Tensor,
    attention_mask: torch.Tensor,
    temperature: float,
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
    # float32 accumulation for half inputs; float64 stays float64 (gradcheck).
    compute = torch.float64 if student.dtype == torch.float64 else torch.float32
    if int(num_masked) == 0:
        # 0, but still part of the graph, so backward() and the optimiser step work.
        zero = (student.to(compute) * 0.0).sum()
        return zero, torch.zeros((), dtype=torch.long, device=student.device), num_masked
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


def tacl_loss_packed_reference(
    student: torch.Tensor,
    teacher: torch.Tensor,
    masked: torch.Tensor,
    cu_seqlens: torch.Tensor,
    temperature: float,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The reference on the packed layout: the rows are put back into a padded
    batch (a gather the gradient flows through) and scored by
    :func:`tacl_loss_reference`."""
    check_packed(student, teacher, masked, cu_seqlens)
    lengths = (cu_seqlens[1:] - cu_seqlens[:-1]).long()
    batch, longest = len(lengths), int(lengths.max()) if len(lengths) else 0
    seq = torch.repeat_interleave(torch.arange(batch, device=student.device), lengths)
    pos = torch.arange(len(seq), device=student.device) - cu_seqlens[:-1].long()[seq]

    def padded(values: torch.Tensor) -> torch.Tensor:
        out = values.new_zeros((batch, longest, *values.shape[1:]))
        return out.index_put((seq, pos), values)

    attention = padded(torch.ones_like(masked, dtype=torch.long))
    return tacl_loss_reference(padded(student), padded(teacher), padded(masked.bool()), attention, temperature)


def check_packed(student: torch.Tensor, teacher: torch.Tensor, masked: torch.Tensor, cu_seqlens: torch.Tensor) -> None:
    """Refuse tensors that are not a packed batch (shapes only: nothing is read)."""
    if student.shape != teacher.shape or student.dim() != 2:
        raise ValueError(f"packed student {tuple(student.shape)} and teacher {tuple(teacher.shape)} must both be (T, D)")
    if masked.shape != student.shape[:1]:
        raise ValueError(f"packed masked {tuple(masked.shape)} must be (T,) = ({student.shape[0]},)")
    if cu_seqlens.dim() != 1 or len(cu_seqlens) < 2:
        raise ValueError(f"cu_seqlens {tuple(cu_seqlens.shape)} must be (B + 1,) offsets")


IMPLEMENTATIONS = ("auto", "torch", "triton")


def _resolve_impl(impl: str, student: torch.Tensor) -> str:
    if impl not in IMPLEMENTATIONS:
        raise ValueError(f"impl {impl!r} is not one of {IMPLEMENTATIONS}")
    if impl == "auto":
        return "triton" if student.is_cuda and triton_available() else "torch"
    if problem := impl_unavailable(impl, student.device.type):
        raise RuntimeError(f"impl={impl!r} {problem}")
    return impl


def impl_unavailable(impl: str, device_type: str) -> str | None:
    """Why the TaCL loss ``impl`` cannot run on a ``device_type`` device, or None
    (``auto`` always runs: it picks what does)."""
    if impl != "triton":
        return None
    if not triton_available():
        return "needs the triton package"
    if device_type != "cuda" and not _triton_interprets():
        return "runs on CUDA GPUs (on the CPU only in Triton's interpreter, TRITON_INTERPRET=1, as the tests run it)"
    return None


def tacl_loss(
    student: torch.Tensor,
    teacher: torch.Tensor,
    masked: torch.Tensor,
    attention_mask: torch.Tensor,
    temperature: float,
    impl: str = "auto",
    rows: MaskedRows | None = None,
    padding_negatives: bool = False,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``loss, num_correct, num_masked`` of the TaCL objective on a padded batch.

    ``student``/``teacher``: (B, L, D) last hidden states (the teacher on the
    unmasked input; it gets no gradient). ``masked``: bool (B, L). ``attention_mask``:
    0/1 (B, L). ``loss`` is a float32 scalar (float64 for float64 inputs on the reference; the Triton kernel's is
    float32; 0 and still differentiable when nothing is masked); the counts are integer tensors. ``impl``: ``torch`` (reference),
    ``triton`` (fused kernel; on CPU tensors only under ``TRITON_INTERPRET=1``),
    ``auto`` (Triton on CUDA when available, else the reference). ``rows``: the
    batch's :class:`~tacl_scale.kernels.rows.MaskedRows` from the collate, with
    which the Triton kernel reads nothing back to the host (the reference ignores it).
    ``padding_negatives``: the released code's softmax over every column of the
    padded batch (see the module docstring); the rows are still the masked real
    tokens, and the collate's ``rows`` (which end each sequence at its last real
    token) are not used, so the kernel reads the masks on the host.
    """
    if padding_negatives:
        # Every column counts as a candidate; the rows stay the masked *real* tokens.
        masked = masked.bool() & attention_mask.bool()
        attention_mask = torch.ones_like(attention_mask)
        rows = None
    if _resolve_impl(impl, student) == "triton":
        from .tacl_triton import tacl_loss_triton

        if student.shape != teacher.shape or student.dim() != 3:
            raise ValueError(f"student {tuple(student.shape)} and teacher {tuple(teacher.shape)} must both be "
                             "(B, L, D)")
        return tacl_loss_triton(student, teacher, masked, attention_mask, temperature, NORM_EPS, rows)
    return tacl_loss_reference(student, teacher, masked, attention_mask, temperature)


def tacl_loss_packed(
    student: torch.Tensor,
    teacher: torch.Tensor,
    masked: torch.Tensor,
    cu_seqlens: torch.Tensor,
    temperature: float,
    impl: str = "auto",
    rows: MaskedRows | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """:func:`tacl_loss` on the packed layout: ``student``/``teacher`` (T, D), the
    real tokens of B sequences back to back; ``masked`` bool (T,); ``cu_seqlens``
    (B + 1,) integer offsets, sequence ``b`` being rows ``cu_seqlens[b]:cu_seqlens[b+1]``.
    Every row is a real token, so the softmax of a masked row runs over its own
    sequence's rows."""
    check_packed(student, teacher, masked, cu_seqlens)
    if _resolve_impl(impl, student) == "triton":
        from .tacl_triton import tacl_loss_triton_packed

        return tacl_loss_triton_packed(student, teacher, masked, cu_seqlens, temperature, NORM_EPS, rows)
    return tacl_loss_packed_reference(student, teacher, masked, cu_seqlens, temperature)


def _triton_interprets() -> bool:
    """Whether Triton runs kernels in its CPU interpreter: its ``TRITON_INTERPRET``,
    read and parsed by Triton itself (``1``, ``true``, ``on``, ...), so this check
    never disagrees with what Triton will do."""
    from triton import knobs

    return bool(knobs.runtime.interpret)


def triton_available() -> bool:
    """Whether Triton is installed (the fused kernel's prerequisite, not its device's)."""
    return importlib.util.find_spec("triton") is not None
