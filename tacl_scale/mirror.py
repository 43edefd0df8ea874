"""The sentence-level contrastive objective of Mirror-BERT (Liu et al. 2021) and
SimCSE (Gao et al. 2021): objective ``mirror``.

Each sequence is encoded twice by the student, dropout on. The second view may also
have a random span of its input replaced by ``[MASK]`` (Mirror-BERT's input-space
augmentation; span 0 leaves dropout alone, which is SimCSE). The two views are
pooled (``[CLS]`` or the mean of the real tokens) and an InfoNCE loss pulls the two
views of a sequence together and pushes every other sequence away.

The loss is NT-Xent as Mirror-BERT computes it (``pytorch_metric_learning``'s
``NTXentLoss`` on the 2N pooled vectors): cosine similarities over a temperature.
Each of the 2N vectors is an anchor, its other view is the positive, and the other
2N − 2 vectors are the negatives. The loss is the mean over anchors of the cross
entropy of the positive. N is the micro-batch of every rank together: with a
``gather`` the vectors of every data-parallel rank are candidates (with gradient
accumulation, the micro-batches of one accumulation step, not the whole global
batch). The gradient flows back to each rank's own rows because the all-gather's
backward is a reduce-scatter. With DeepSpeed's gradient averaging, 2 ranks × B then
train exactly as 1 rank × 2B would.

Within TaCL's pre-training data the two views are made from each instance's
*unmasked* sequence (``original_ids``: the ``[CLS] A [SEP] B [SEP]`` pair, segment
ids kept). The MLM-masked input is the other objectives' business: dropout and the
span are the augmentations, not the 15% masks.

The views are made on the data side (:class:`tacl_scale.data.views.MirrorViews`),
seeded by (seed, epoch, instance), so a run's views do not depend on rank count.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F

# ``gather(rows)`` → (the rows of every rank stacked in rank order, where this rank's start).
Gather = Callable[[torch.Tensor], tuple[torch.Tensor, int]]

def both_views(batch: dict[str, Any]) -> tuple[torch.Tensor, dict[str, Any]]:
    """The two views of every sequence as one batch of twice the size, so the
    student encodes them in one forward pass (each row gets its own dropout).

    Returns the input ids and a batch dict with the layout keys to match: padded
    ``(2B, L)`` (view 1 rows, then view 2 rows), or packed ``(2T,)`` with the
    sequences of view 2 after those of view 1."""
    views = batch["mirror_ids"]  # (2, B, L) padded, (2, T) packed
    if "cu_seqlens" in batch:
        cu = batch["cu_seqlens"]
        total = views.shape[1]
        doubled = {
            "token_type_ids": batch["token_type_ids"].repeat(2),
            "position_ids": batch["position_ids"].repeat(2),
            "cu_seqlens": torch.cat([cu, cu[1:] + total]),
            "max_seqlen": batch["max_seqlen"],
        }
        return views.reshape(-1), doubled
    doubled = {
        "attention_mask": batch["attention_mask"].repeat(2, 1),
        "token_type_ids": batch["token_type_ids"].repeat(2, 1),
    }
    return views.reshape(-1, views.shape[-1]), doubled


def pool(hidden: torch.Tensor, batch: dict[str, Any], pooling: str) -> torch.Tensor:
    """One vector per sequence from the last hidden states: ``hidden`` (B, L, D)
    with the batch's ``attention_mask``, or (T, D) with its ``cu_seqlens``.
    ``mean`` averages the real tokens only (specials included, padding never)."""
    if "cu_seqlens" in batch:
        cu = batch["cu_seqlens"].long()
        if pooling == "cls":
            return hidden[cu[:-1]]
        lengths = cu[1:] - cu[:-1]
        # Each row's sequence by search, not repeat_interleave: its output size would
        # have to be read from the GPU first.
        owner = torch.searchsorted(cu[1:], torch.arange(hidden.shape[0], device=hidden.device), right=True)
        sums = hidden.new_zeros((len(lengths), hidden.shape[-1]), dtype=torch.float32)
        sums.index_add_(0, owner, hidden.float())
        return sums / lengths[:, None].to(sums.dtype)
    if pooling == "cls":
        return hidden[:, 0]
    mask = batch["attention_mask"][..., None].to(torch.float32)
    return (hidden.float() * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1.0)


def info_nce(
    view1: torch.Tensor, view2: torch.Tensor, temperature: float, gather: Gather | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """NT-Xent over the pooled vectors of the two views (B, D) each: (mean loss over
    this rank's 2B anchors, share of anchors whose most similar candidate is their
    other view). With ``gather``, the candidates are every rank's vectors."""
    local = F.normalize(torch.cat([view1, view2]).float(), dim=-1)  # (2B, D)
    candidates, start = gather(local) if gather is not None else (local, 0)
    rows = local.shape[0]
    half = rows // 2
    anchor = torch.arange(rows, device=local.device)
    logits = local @ candidates.T / temperature  # (2B, 2N)
    logits[anchor, start + anchor] = float("-inf")  # an anchor is not its own candidate
    target = start + (anchor + half) % rows
    loss = F.cross_entropy(logits, target)
    accuracy = (logits.argmax(dim=-1) == target).float().mean()
    return loss, accuracy
