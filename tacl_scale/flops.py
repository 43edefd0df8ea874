"""Model FLOPs per step and utilisation (MFU) for the training log on GPUs.

MFU is model FLOPs ÷ (time × the GPU's datasheet dense fp16/bf16 peak): 989
TFLOP/s for an H100 or H200 SXM. Everything that reports an MFU uses :func:`mfu`.

Counted like the PaLM/Megatron papers: a matmul of (m×k)·(k×n) is 2mkn FLOPs, the
backward pass twice the forward; the teacher runs forward only. Embedding lookups,
softmax and norms are not counted. Only real tokens count: a padded batch does the
work of its longest sequence for every row, but its *model* FLOPs are those of its
real tokens, so padding shows up as lower utilisation, never as more work.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

# Dense fp16/bf16 tensor-core peak per GPU (datasheet), by a substring of the device
# name; the first match wins, so a variant comes before its family.
PEAK_FLOPS = (
    ("H100 PCIe", 756e12),
    ("H100 NVL", 835e12),
    ("H200", 989e12),  # GH200 too
    ("H100", 989e12),
    ("A100", 312e12),
    ("L40S", 362e12),
    ("A10", 125e12),
    ("V100", 125e12),
    ("L4", 121e12),
)


def encoder_forward_flops(config: Any, lengths: Sequence[int]) -> float:
    """Forward FLOPs of the transformer layers of a BERT encoder over sequences of
    these real lengths (each attends within itself)."""
    h, i, n = config.hidden_size, config.intermediate_size, config.num_hidden_layers
    tokens = sum(int(x) for x in lengths)
    pairs = sum(int(x) ** 2 for x in lengths)
    per_layer = 2 * tokens * (4 * h * h + 2 * h * i) + 2 * 2 * pairs * h
    return float(n * per_layer)


def step_flops(config: Any, lengths: Sequence[int], masked_tokens: int,
               objectives: tuple[str, ...]) -> dict[str, float]:
    """Model FLOPs of one micro-batch: ``student`` (forward + backward, heads and
    the TaCL similarities included), ``teacher`` (forward) and ``total``. ``mirror``
    encodes its two views on top (the InfoNCE similarities are negligible)."""
    h, v = config.hidden_size, config.vocab_size
    masked_input = any(o in objectives for o in ("tacl", "mlm", "nsp"))
    student = encoder_forward_flops(config, lengths) if masked_input else 0.0
    if "mirror" in objectives:
        student += 2 * encoder_forward_flops(config, lengths)
    if "mlm" in objectives:  # transform + vocabulary projection at masked rows only
        student += 2 * masked_tokens * (h * h + h * v)
    if "tacl" in objectives:  # each masked row against its own sequence
        mean_length = sum(int(x) for x in lengths) / max(len(lengths), 1)
        student += 2 * masked_tokens * mean_length * h
    teacher = encoder_forward_flops(config, lengths) if "tacl" in objectives else 0.0
    return {"student": 3 * student, "teacher": teacher, "total": 3 * student + teacher}


def peak_flops(device_name: str) -> float | None:
    """The datasheet dense fp16/bf16 peak of a GPU named ``device_name`` (FLOP/s),
    or ``None`` for a device not in :data:`PEAK_FLOPS`."""
    for key, value in PEAK_FLOPS:
        if key in device_name:
            return value
    return None


def mfu(model_flops: float, seconds: float, peak: float) -> float:
    """Model FLOPs utilisation, the one definition of the project (the trainer's
    ``mfu`` metric, ``bench_train_gpu.py`` and ``gpu_check``): model FLOPs done in
    ``seconds`` ÷ (``seconds`` × the datasheet dense peak of :func:`peak_flops`).
    A measured matmul rate is only ever printed beside it, for reference."""
    return model_flops / (max(seconds, 1e-12) * peak)
