"""Model FLOPs per step and utilisation (MFU) for the training log on GPUs.

Counted like the PaLM/Megatron papers: a matmul of (m×k)·(k×n) is 2mkn FLOPs, the
backward pass twice the forward; the teacher runs forward only. Embedding lookups,
softmax and norms are not counted.
"""

from __future__ import annotations

from typing import Any

# Dense fp16/bf16 tensor-core peak per GPU, by a substring of the device name.
PEAK_FLOPS = {
    "H200": 989e12,
    "H100": 989e12,
    "A100": 312e12,
    "L40S": 362e12,
    "A10": 125e12,
    "V100": 125e12,
    "L4": 121e12,
}


def encoder_forward_flops(config: Any, batch: int, length: int) -> float:
    """Forward FLOPs of the transformer layers of a BERT encoder."""
    h, i, n = config.hidden_size, config.intermediate_size, config.num_hidden_layers
    tokens = batch * length
    per_layer = 2 * tokens * (4 * h * h + 2 * h * i) + 2 * 2 * batch * length * length * h
    return float(n * per_layer)


def step_flops(config: Any, batch: int, length: int, masked_tokens: int, objectives: tuple[str, ...]) -> float:
    """Model FLOPs of one training step (student forward+backward, heads, teacher)."""
    h, v = config.hidden_size, config.vocab_size
    student = encoder_forward_flops(config, batch, length)
    if "mlm" in objectives:  # transform + vocabulary projection at masked rows only
        student += 2 * masked_tokens * (h * h + h * v)
    if "tacl" in objectives:  # (B, K, L) similarities
        student += 2 * masked_tokens * length * h
    total = 3 * student
    if "tacl" in objectives:
        total += encoder_forward_flops(config, batch, length)
    return total


def peak_flops(device_name: str) -> float | None:
    for key, value in PEAK_FLOPS.items():
        if key in device_name:
            return value
    return None
