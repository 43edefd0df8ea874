"""How large a micro-batch fits: ``"train_micro_batch_size_per_gpu": "auto"``.

A training step's memory is a fixed part (the student's weights, gradients, fp32
masters and AdamW moments, and the teacher's weights) plus the activations saved
for the backward pass, which grow with the tokens of a micro-batch. Both are
estimated from the model's shape, the second per token as Korthikanti et al.
("Reducing Activation Recomputation in Large Transformer Models", 2022) count it
with FlashAttention (no ``L × L`` scores kept), once per student pass over a
sequence (the masked input, and mirror's two views), plus the MLM head's logits at
the masked rows (:class:`Workload`). The estimate is conservative: on an H200,
BERT-base at micro-batch 256 and length 256 measured 22.7 GiB where it gives about
32.

The micro-batch chosen is the largest divisor of the per-rank batch whose estimate
fits in the device's memory, so the global batch stays exact with no partial
accumulation step.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from .data.shuffle import BatchLayout
from .model import MASKED_INPUT_OBJECTIVES

# Bytes per parameter the student holds while training in mixed precision: bf16/fp16
# weights and gradients (2 + 2), fp32 masters (4), fp32 gradient accumulation (4)
# and AdamW's two fp32 moments (8).
STUDENT_BYTES_PER_PARAMETER = 20
# The student runs once on the MLM-masked input for all of MASKED_INPUT_OBJECTIVES,
# and mirror runs it on two views of its own.
MIRROR_VIEWS = 2
# Masked share of the tokens (BERT's 15%) and the MLM logits' bytes per entry: the
# half logits, their fp32 copy for the softmax and its gradient.
MASKED_SHARE = 0.15
LOGIT_BYTES = 10
# Allocator fragmentation, workspaces and the transient peaks the count leaves out.
SAFETY = 1.25
# Of the device's memory, what training may plan to use.
USABLE_SHARE = 0.9
# On the CPU memory is not what limits a micro-batch: the old default.
CPU_MICRO_BATCH = 32


@dataclass(frozen=True)
class Workload:
    """What a training step holds beside the student's weights and optimizer state."""

    teacher_bytes_per_parameter: int = 2  # the teacher's weights (0: no teacher)
    encoder_passes: int = 1  # student passes over each sequence whose activations the backward keeps
    mlm_logits: bool = True  # the MLM head's logits at the masked rows
    activation_scale: int = 1  # 1 for half-precision activations, 2 for fp32

    @classmethod
    def of(cls, objectives: Sequence[str], teacher_dtype: torch.dtype | None, precision: str) -> Workload:
        """The workload of training ``objectives`` with a teacher whose weights are
        ``teacher_dtype`` (None: no teacher; it holds no gradients and no optimizer
        state) and the student in ``precision`` (fp16, bf16 or fp32)."""
        masked = any(name in MASKED_INPUT_OBJECTIVES for name in objectives)
        return cls(teacher_bytes_per_parameter=teacher_dtype.itemsize if teacher_dtype is not None else 0,
                   encoder_passes=int(masked) + (MIRROR_VIEWS if "mirror" in objectives else 0),
                   mlm_logits="mlm" in objectives, activation_scale=2 if precision == "fp32" else 1)


# TaCL (tacl, mlm, nsp) with a half teacher and a half student: the paper's run.
TACL = Workload()


def activation_bytes_per_token(config: Any, workload: Workload = TACL) -> float:
    """Bytes saved for backward per token of a micro-batch, in half precision:
    per layer and student pass 18·h + 4·i (the layer norms' and projections'
    inputs, Q, K, V, the attention output, the feed-forward's pre- and
    post-activation, dropout masks), plus the MLM head's logits at the masked
    share of the tokens; twice that in fp32."""
    h, i = config.hidden_size, config.intermediate_size
    encoder = workload.encoder_passes * config.num_hidden_layers * (18 * h + 4 * i)
    logits = MASKED_SHARE * config.vocab_size * LOGIT_BYTES if workload.mlm_logits else 0.0
    return workload.activation_scale * (encoder + logits)


def parameter_count(config: Any) -> int:
    """Parameters of ``BertForPreTraining`` with this config (tied decoder counted once)."""
    h, i, layers = config.hidden_size, config.intermediate_size, config.num_hidden_layers
    embeddings = (config.vocab_size + config.max_position_embeddings + config.type_vocab_size + 2) * h
    per_layer = 4 * h * h + 4 * h + 2 * h * i + i + h + 4 * h
    heads = h * h + h + 2 * h + config.vocab_size + h * h + h + 2 * h + 2
    return embeddings + layers * per_layer + heads


def training_bytes(config: Any, micro_batch: int, max_len: int, workload: Workload = TACL) -> float:
    """The estimated peak of a training step at ``micro_batch`` sequences of
    ``max_len`` tokens (every sequence at the longest: the worst micro-batch)."""
    fixed = parameter_count(config) * (STUDENT_BYTES_PER_PARAMETER + workload.teacher_bytes_per_parameter)
    return SAFETY * (fixed + micro_batch * max_len * activation_bytes_per_token(config, workload))


def largest_micro_batch(per_rank_batch: int, fits: Any) -> int:
    """The largest divisor of ``per_rank_batch`` for which ``fits(divisor)``; 1 if
    none does (the step then runs out of memory with the device's own message)."""
    return next((d for d in reversed(BatchLayout.micro_batch_sizes(per_rank_batch, 1)) if fits(d)), 1)


def auto_micro_batch(config: Any, per_rank_batch: int, max_len: int, workload: Workload,
                     device_bytes: int | None) -> int:
    """The micro-batch ``"auto"`` means: on a GPU of ``device_bytes`` the largest
    divisor of ``per_rank_batch`` whose :func:`training_bytes` fit in
    :data:`USABLE_SHARE` of it; on the CPU (``None``) the largest divisor up to
    :data:`CPU_MICRO_BATCH`."""
    if device_bytes is None:
        return largest_micro_batch(per_rank_batch, lambda m: m <= CPU_MICRO_BATCH)
    budget = USABLE_SHARE * device_bytes
    return largest_micro_batch(per_rank_batch, lambda m: training_bytes(config, m, max_len, workload) <= budget)
