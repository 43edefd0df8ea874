"""Unpadded (variable-length) self-attention for BERT, plugged into transformers'
attention interface under the name :data:`ATTENTION`.

A packed batch is one row of ``T`` real tokens, the sequences back to back, with
their offsets ``cu_seqlens`` passed through the model's ``**kwargs`` as
``cu_seq_lens_q``/``cu_seq_lens_k`` (transformers' own names for them). Every token
then attends to the tokens of its own sequence only, and nothing is computed on
padding: neither in attention nor in the embeddings, projections and feed-forward
layers, which see the ``T`` real tokens alone.

- CUDA, fp16/bf16: FlashAttention-2's varlen kernel as PyTorch ships it
  (``aten::_flash_attention_forward``, differentiable, with attention dropout), so
  no extra package is needed.
- Elsewhere (CPU, fp32): scaled dot-product attention per sequence: the same
  result, for tests and small runs.
- A GPU below sm_80 (V100, T4) has no FlashAttention-2: :func:`varlen_unsupported`
  says so and the trainer pads its batches there instead.
- A padded batch (no offsets) goes to transformers' SDPA path unchanged, so one
  model serves both layouts (evaluation and analysis stay padded).
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

ATTENTION = "tacl_varlen"
FLASH_DTYPES = (torch.float16, torch.bfloat16)


def varlen_attention_forward(
    module: torch.nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    scaling: float | None = None,
    dropout: float = 0.0,
    **kwargs: Any,
) -> tuple[torch.Tensor, None]:
    """transformers' attention-function signature: ``query``/``key``/``value`` are
    (batch, heads, tokens, head_dim); returns (batch, tokens, heads, head_dim)."""
    cu_seqlens = kwargs.get("cu_seq_lens_q")
    if cu_seqlens is None:
        from transformers.integrations.sdpa_attention import sdpa_attention_forward

        return sdpa_attention_forward(module, query, key, value, attention_mask, scaling=scaling,
                                      dropout=dropout, **kwargs)
    if query.shape[0] != 1:
        raise ValueError(f"a packed batch is one row of tokens, got query {tuple(query.shape)}")
    max_len = int(kwargs["max_length_q"])
    q, k, v = (x[0].transpose(0, 1) for x in (query, key, value))  # (T, heads, head_dim)
    if q.is_cuda and q.dtype in FLASH_DTYPES:
        out = torch.ops.aten._flash_attention_forward(
            q, k, v, cu_seqlens, cu_seqlens, max_len, max_len, dropout, False, False, scale=scaling
        )[0]
    else:
        out = per_sequence_attention(q, k, v, cu_seqlens, scaling, dropout)
    return out.unsqueeze(0), None


def per_sequence_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cu_seqlens: torch.Tensor, scaling: float | None,
    dropout: float,
) -> torch.Tensor:
    """Packed (T, heads, head_dim) attention, one SDPA call per sequence."""
    bounds = cu_seqlens.tolist()
    outs = []
    for start, end in zip(bounds[:-1], bounds[1:], strict=True):
        qs, ks, vs = (x[start:end].transpose(0, 1) for x in (q, k, v))  # (heads, len, head_dim)
        outs.append(F.scaled_dot_product_attention(qs, ks, vs, dropout_p=dropout, scale=scaling).transpose(0, 1))
    return torch.cat(outs) if outs else q.new_empty(q.shape)


def varlen_unsupported(device: torch.device) -> str | None:
    """Why FlashAttention-2's varlen kernel cannot run on the CUDA ``device``
    (compute capability below 8.0, as V100 and T4; a torch built without it), or
    ``None`` when it can."""
    if not torch.backends.cuda.is_flash_attention_available():
        return f"torch {torch.__version__} is built without it"
    if not hasattr(torch.ops.aten, "_flash_attention_forward"):
        return f"torch {torch.__version__} has no aten::_flash_attention_forward"
    major, minor = torch.cuda.get_device_capability(device)
    if (major, minor) < (8, 0):
        return f"{torch.cuda.get_device_name(device)} is sm_{major}{minor}, below the sm_80 it needs"
    return None


def register() -> str:
    """Make :data:`ATTENTION` known to transformers (idempotent); padded batches
    get SDPA's mask."""
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

    AttentionInterface.register(ATTENTION, varlen_attention_forward)
    AttentionMaskInterface.register(ATTENTION, sdpa_mask)
    return ATTENTION
