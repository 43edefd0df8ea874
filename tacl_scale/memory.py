"""How large a micro-batch fits: ``"train_micro_batch_size_per_gpu": "auto"``.

A training step's memory is a fixed part (the student's weights, gradients, fp32
masters and AdamW moments, and the teacher's weights) plus the activations saved
for the backward pass, which grow with the tokens of a micro-batch. Both are
estimated from the model's shape, the second per token as Korthikanti et al.
("Reducing Activation Recomputation in Large Transformer Models", 2022) count it
with FlashAttention (no ``L × L`` scores kept), plus the MLM head's logits at the
masked rows. The estimate is conservative: on an H200, BERT-base at micro-batch 256
and length 256 measured 22.7 GiB where it gives about 32.

The micro-batch chosen is the largest divisor of the per-rank batch whose estimate
fits in the device's memory, so the global batch stays exact with no partial
accumulation step.
"""

from __future__ import annotations

from typing import Any

from .data.shuffle import BatchLayout

# Bytes per parameter the student holds while training in mixed precision: bf16/fp16
# weights and gradients (2 + 2), fp32 masters (4), fp32 gradient accumulation (4)
# and AdamW's two fp32 moments (8); the teacher keeps a half copy (2).
STUDENT_BYTES_PER_PARAMETER = 20
TEACHER_BYTES_PER_PARAMETER = 2
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


def activation_bytes_per_token(config: Any) -> float:
    """Bytes saved for backward per token of a micro-batch, in half precision:
    per layer 18·h + 4·i (the layer norms' and projections' inputs, Q, K, V, the
    attention output, the feed-forward's pre- and post-activation, dropout masks),
    plus the MLM head's logits at the masked share of the tokens."""
    h, i = config.hidden_size, config.intermediate_size
    return config.num_hidden_layers * (18 * h + 4 * i) + MASKED_SHARE * config.vocab_size * LOGIT_BYTES


def parameter_count(config: Any) -> int:
    """Parameters of ``BertForPreTraining`` with this config (tied decoder counted once)."""
    h, i, layers = config.hidden_size, config.intermediate_size, config.num_hidden_layers
    embeddings = (config.vocab_size + config.max_position_embeddings + config.type_vocab_size + 2) * h
    per_layer = 4 * h * h + 4 * h + 2 * h * i + i + h + 4 * h
    heads = h * h + h + 2 * h + config.vocab_size + h * h + h + 2 * h + 2
    return embeddings + layers * per_layer + heads


def training_bytes(config: Any, micro_batch: int, max_len: int, with_teacher: bool) -> float:
    """The estimated peak of a training step at ``micro_batch`` sequences of
    ``max_len`` tokens (every sequence at the longest: the worst micro-batch)."""
    fixed = parameter_count(config) * (STUDENT_BYTES_PER_PARAMETER + (TEACHER_BYTES_PER_PARAMETER if with_teacher
                                                                        else 0))
    return SAFETY * (fixed + micro_batch * max_len * activation_bytes_per_token(config))


def largest_micro_batch(per_rank_batch: int, fits: Any) -> int:
    """The largest divisor of ``per_rank_batch`` for which ``fits(divisor)``; 1 if
    none does (the step then runs out of memory with the device's own message)."""
    return next((d for d in reversed(BatchLayout.micro_batch_sizes(per_rank_batch, 1)) if fits(d)), 1)


def auto_micro_batch(config: Any, per_rank_batch: int, max_len: int, with_teacher: bool,
                     device_bytes: int | None) -> int:
    """The micro-batch ``"auto"`` means: on a GPU of ``device_bytes`` the largest
    divisor of ``per_rank_batch`` whose :func:`training_bytes` fit in
    :data:`USABLE_SHARE` of it; on the CPU (``None``) the largest divisor up to
    :data:`CPU_MICRO_BATCH`."""
    if device_bytes is None:
        return largest_micro_batch(per_rank_batch, lambda m: m <= CPU_MICRO_BATCH)
    budget = USABLE_SHARE * device_bytes
    return largest_micro_batch(per_rank_batch, lambda m: training_bytes(config, m, max_len, with_teacher) <= budget)
