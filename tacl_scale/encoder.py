"""BERT's encoder forward, written for ``torch.compile``: the student's and the
teacher's training forward on GPUs (``--compile``, the default on CUDA).

It computes what Hugging Face's ``BertModel`` computes (embeddings, then each layer's
self-attention, residual + LayerNorm, feed-forward, residual + LayerNorm), reading
the very parameters of the ``BertModel`` it is given: nothing is copied or renamed,
so DeepSpeed trains, checkpoints and exports the same module as without it, and
``BertModel`` stays the reference the tests hold it to. What differs is the shape
of the computation, chosen so inductor can make it fast:

- the query, key and value projections are one matrix product (their weights
  concatenated, a few MB, on the fly), not three;
- the element-wise work between the products (bias + GELU, dropout + residual +
  LayerNorm, the embeddings' sums) is left to inductor, which fuses each run of it
  into one kernel;
- packed batches run on a few static shapes: the token count is rounded up to a
  bucket (:class:`~tacl_scale.data.buckets.TokenBuckets`) whose padding rows form
  sequences of their own, and the attention is FlashAttention-2's varlen kernel
  called as the ATen op, which dynamo traces without a graph break (on the CPU, a
  block-diagonal mask over SDPA; there is no FlashAttention there);
- the token dimension is marked dynamic, so one graph serves every bucket (and the
  mirror objective's doubled batches): nothing recompiles after the first call.

Padded training batches (``--no-unpad``) run the same layers with SDPA and the
padding mask; evaluation runs Hugging Face's ``BertModel``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from transformers import BertModel

from .attention import FLASH_DTYPES
from .data.buckets import TokenBuckets

Attend = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, float], torch.Tensor]


def _layer_norm(x: torch.Tensor, norm: torch.nn.LayerNorm) -> torch.Tensor:
    return F.layer_norm(x, norm.normalized_shape, norm.weight, norm.bias, norm.eps)


def embed(bert: BertModel, input_ids: torch.Tensor, token_type_ids: torch.Tensor, position_ids: torch.Tensor,
          training: bool) -> torch.Tensor:
    """``BertEmbeddings``: word + segment + position, LayerNorm, dropout (the sums in
    its order, so fp32 results match it bit for bit)."""
    emb = bert.embeddings
    x = emb.word_embeddings(input_ids) + emb.token_type_embeddings(token_type_ids)
    x = x + emb.position_embeddings(position_ids)
    return F.dropout(_layer_norm(x, emb.LayerNorm), emb.dropout.p, training)


def layer_forward(layer: Any, x: torch.Tensor, attend: Attend, training: bool) -> torch.Tensor:
    """One ``BertLayer`` on ``x`` (..., D), with ``attend(q, k, v, dropout)`` mapping
    (..., heads, head_dim) queries, keys and values to the attention's output."""
    self_attention, heads = layer.attention.self, layer.attention.self.num_attention_heads
    weight = torch.cat([self_attention.query.weight, self_attention.key.weight, self_attention.value.weight])
    bias = torch.cat([self_attention.query.bias, self_attention.key.bias, self_attention.value.bias])
    qkv = F.linear(x, weight, bias).unflatten(-1, (3, heads, -1))  # (..., 3, heads, head_dim)
    q, k, v = qkv.unbind(-3)
    attention_dropout = self_attention.dropout.p if training else 0.0
    context = attend(q, k, v, attention_dropout).flatten(-2)
    out = layer.attention.output
    h = _layer_norm(F.dropout(F.linear(context, out.dense.weight, out.dense.bias), out.dropout.p, training) + x,
                    out.LayerNorm)
    intermediate = layer.intermediate.intermediate_act_fn(F.linear(h, layer.intermediate.dense.weight,
                                                                   layer.intermediate.dense.bias))
    out = layer.output
    return _layer_norm(F.dropout(F.linear(intermediate, out.dense.weight, out.dense.bias), out.dropout.p, training)
                       + h, out.LayerNorm)


def packed_attention(cu_seqlens: torch.Tensor, max_seqlen: int, scale: float) -> Attend:
    """Attention of a packed (T, heads, head_dim) batch, each token within its own
    sequence of ``cu_seqlens``: FlashAttention-2 varlen on CUDA in half precision,
    a block-diagonal mask over SDPA elsewhere (O(T²) memory: CPU runs are small)."""

    def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, dropout: float) -> torch.Tensor:
        if q.is_cuda and q.dtype in FLASH_DTYPES:
            return torch.ops.aten._flash_attention_forward(q, k, v, cu_seqlens, cu_seqlens, max_seqlen, max_seqlen,
                                                           dropout, False, False, scale=scale)[0]
        tokens = q.shape[0]
        owner = torch.searchsorted(cu_seqlens, torch.arange(tokens, device=q.device, dtype=cu_seqlens.dtype),
                                   right=True)
        same = (owner[:, None] == owner[None, :])[None, None]
        out = F.scaled_dot_product_attention(q.transpose(0, 1)[None], k.transpose(0, 1)[None],
                                             v.transpose(0, 1)[None], attn_mask=same, dropout_p=dropout, scale=scale)
        return out[0].transpose(0, 1)

    return attend


def padded_attention(attention_mask: torch.Tensor, scale: float) -> Attend:
    """Attention of a padded (B, L, heads, head_dim) batch over its real keys."""
    keys = attention_mask.bool()[:, None, None, :]

    def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, dropout: float) -> torch.Tensor:
        out = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                             attn_mask=keys, dropout_p=dropout, scale=scale)
        return out.transpose(1, 2)

    return attend


def encoder_forward(bert: BertModel, input_ids: torch.Tensor, token_type_ids: torch.Tensor,
                    position_ids: torch.Tensor | None, cu_seqlens: torch.Tensor | None, max_seqlen: int,
                    attention_mask: torch.Tensor | None, training: bool) -> torch.Tensor:
    """The last hidden states of ``bert``'s encoder: (T, D) for a packed batch
    (``cu_seqlens``, ``max_seqlen``), (B, L, D) for a padded one (``attention_mask``)."""
    self_attention = bert.encoder.layer[0].attention.self
    scale = self_attention.attention_head_size ** -0.5
    if cu_seqlens is not None:
        attend = packed_attention(cu_seqlens, max_seqlen, scale)
    else:
        assert attention_mask is not None
        attend = padded_attention(attention_mask, scale)
        position_ids = torch.arange(input_ids.shape[1], device=input_ids.device)[None]
    x = embed(bert, input_ids, token_type_ids, position_ids, training)
    for layer in bert.encoder.layer:
        x = layer_forward(layer, x, attend, training)
    return x


def masked_lm_loss(predictions: torch.nn.Module, picked: torch.Tensor,
                   labels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(mean cross entropy, accuracy) of the MLM head ``predictions`` on the masked
    rows ``picked`` (M, D) against ``labels`` (M,); the logits in fp32 (inductor
    fuses the cast into the softmax instead of writing an (M, V) fp32 copy)."""
    logits = predictions(picked).float()
    return F.cross_entropy(logits, labels), (logits.argmax(-1) == labels).float().mean()


def encoder_forward_graphed(*args: Any) -> torch.Tensor:
    """:func:`encoder_forward` under another code object, so that its CUDA-graph
    compilation (``reduce-overhead``) never shares dynamo's cache with the plain one."""
    return encoder_forward(*args)


# One torch.compile wrapper per function per process, on purpose: every Trainer in the
# process (student, teacher, a benchmark's several setups) shares its dynamo cache and
# compiled graphs, instead of compiling BERT again (about 50 s on a GPU) for each.
_compiled: dict[str, Callable[..., Any]] = {}


def compiled(name: str) -> Callable[..., Any]:
    """``encoder_forward`` (``encoder_forward_graphed``: the same replayed as CUDA
    graphs, one per token bucket, ``mode="reduce-overhead"``) or ``masked_lm_loss``
    under ``torch.compile``, made once per process (the student and the teacher get
    a graph each, told apart by dynamo's guards on the module); ``fullgraph``: a
    graph break is an error, not a slow path."""
    if name not in _compiled:
        functions = {"encoder_forward": encoder_forward, "encoder_forward_graphed": encoder_forward_graphed,
                     "masked_lm_loss": masked_lm_loss}
        mode = "reduce-overhead" if name == "encoder_forward_graphed" else None
        _compiled[name] = torch.compile(functions[name], dynamic=None, fullgraph=True, mode=mode)
    return _compiled[name]


def expect_cuda_graphs(shapes: int) -> None:
    """Let inductor record ``shapes`` CUDA graphs per compiled function (one per
    shape the encoder is given: a token bucket) before it warns of too many. Its
    default limit (8) warns at the ninth bucket, advising to pad inputs to a few
    shapes, which the buckets already do. The limit is process-wide inductor
    config: it is only ever raised, and left off where someone turned it off."""
    triton = torch._inductor.config.triton
    if triton.cudagraph_dynamic_shape_warn_limit is not None:
        triton.cudagraph_dynamic_shape_warn_limit = max(triton.cudagraph_dynamic_shape_warn_limit, shapes)


def new_micro_batch() -> None:
    """Tell the CUDA graphs a micro-batch begins: the previous one's outputs (its
    teacher states and hidden states, their backward done) may be overwritten."""
    torch.compiler.cudagraph_mark_step_begin()


def bucket_offsets(buckets: TokenBuckets, cu_seqlens: torch.Tensor, tokens: int) -> torch.Tensor:
    """``cu_seqlens`` of a packed batch of ``tokens`` real tokens followed by the
    ends of the padding sequences that fill its bucket (:meth:`TokenBuckets.tail_bounds`),
    made on the device from host integers: no copy, no wait."""
    rows, pieces = buckets.bucket(tokens), buckets.tail_pieces
    steps = torch.arange(1, pieces + 1, device=cu_seqlens.device, dtype=cu_seqlens.dtype)
    return torch.cat([cu_seqlens, tokens + (steps * (rows - tokens)) // pieces])


class CompiledEncoder:
    """``bert``'s encoder through :func:`compiled` ``encoder_forward``. A plain object,
    not a module: holding it must not add ``bert``'s parameters under a second name
    to the module DeepSpeed checkpoints. ``buckets`` (for packed batches) pads the
    token count to a bucket; ``None`` runs each batch at its own size. With
    ``cuda_graphs`` (``--cuda-graphs``) each bucket's forward and backward are
    captured once and replayed, so a micro-batch costs the host a few launches: the
    caller marks each micro-batch's start (:func:`new_micro_batch`)."""

    def __init__(self, bert: BertModel, buckets: TokenBuckets | None, cuda_graphs: bool = False) -> None:
        self.bert = bert
        self.buckets = buckets
        self.cuda_graphs = cuda_graphs  # replayed per bucket (on CUDA; inductor skips them on the CPU)
        # How often each shape ran (a bucket's rows; a padded batch's length). With CUDA
        # graphs a shape's first call runs eagerly, its second records its graph and the
        # later ones replay it: what a benchmark waits for before it times.
        self.calls_per_shape: Counter[int] = Counter()
        self.forward = compiled("encoder_forward_graphed" if cuda_graphs else "encoder_forward")
        self.mlm = compiled("masked_lm_loss")

    def __call__(self, input_ids: torch.Tensor, batch: dict[str, Any]) -> torch.Tensor:
        """The last hidden states on ``input_ids`` with the batch's segments and
        layout: (T, D) packed, (B, L, D) padded, as :func:`encoder_forward`."""
        training = self.bert.training
        if "cu_seqlens" not in batch:
            ids, segments, mask = input_ids, batch["token_type_ids"], batch["attention_mask"]
            for tensor in (ids, segments, mask):
                torch._dynamo.mark_dynamic(tensor, 1)
            self.calls_per_shape[ids.shape[1]] += 1
            return self.forward(self.bert, ids, segments, None, None, 0, mask, training)
        tokens = input_ids.shape[0]
        cu_seqlens, max_seqlen = batch["cu_seqlens"], batch["max_seqlen"]
        ids, segments, positions = input_ids, batch["token_type_ids"], batch["position_ids"]
        if self.buckets is not None:
            pad = (0, self.buckets.bucket(tokens) - tokens)
            ids, segments, positions = F.pad(ids, pad), F.pad(segments, pad), F.pad(positions, pad)
            cu_seqlens = bucket_offsets(self.buckets, cu_seqlens, tokens)
            max_seqlen = self.buckets.max_len
        for tensor in (ids, segments, positions, cu_seqlens):
            torch._dynamo.mark_dynamic(tensor, 0)
        self.calls_per_shape[ids.shape[0]] += 1
        hidden = self.forward(self.bert, ids, segments, positions, cu_seqlens, max_seqlen, None, training)
        return hidden[:tokens]

    def masked_lm(self, predictions: torch.nn.Module, picked: torch.Tensor,
                  labels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """:func:`masked_lm_loss`, compiled for the M (>= 2) masked rows of any batch."""
        if labels.shape[0] < 2:  # dynamo specialises sizes 0 and 1
            return masked_lm_loss(predictions, picked, labels)
        torch._dynamo.mark_dynamic(picked, 0)
        torch._dynamo.mark_dynamic(labels, 0)
        return self.mlm(predictions, picked, labels)
