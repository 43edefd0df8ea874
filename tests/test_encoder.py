"""The compiled encoder (``tacl_scale/encoder.py``) held to Hugging Face's
``BertModel``: the same hidden states and gradients from the same parameters, in
both layouts; under ``torch.compile`` on the CPU (inductor), one graph for every
token bucket, no graph break, each layer's element-wise work fused and no fp32
copy of the MLM logits; the CUDA branch's FlashAttention traced on fake CUDA
tensors where torch is built with CUDA (the GPU-image tier)."""

from __future__ import annotations

import re
from collections import Counter

import pytest
import torch
from transformers import BertConfig, BertModel

from tacl_scale.attention import register
from tacl_scale.data.buckets import TokenBuckets
from tacl_scale.encoder import CompiledEncoder, bucket_offsets, encoder_forward, masked_lm_loss
from tacl_scale.model import encode

pytestmark = [pytest.mark.framework]

# Dropout off: the compiled graph draws its dropout masks from inductor's own random
# stream, so only a model without dropout can be compared number for number.
TINY = dict(vocab_size=300, hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
            max_position_embeddings=64, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)


def tiny_bert(**overrides: float) -> BertModel:
    config = BertConfig(**{**TINY, **overrides})
    config._attn_implementation = register()
    torch.manual_seed(0)
    return BertModel(config, add_pooling_layer=False)


def packed_batch(lengths: list[int], seed: int = 0) -> tuple[torch.Tensor, dict]:
    generator = torch.Generator().manual_seed(seed)
    tokens = sum(lengths)
    cu = torch.tensor([0, *torch.tensor(lengths).cumsum(0).tolist()], dtype=torch.int32)
    batch = {"cu_seqlens": cu, "max_seqlen": max(lengths),
             "token_type_ids": torch.randint(0, 2, (tokens,), generator=generator),
             "position_ids": torch.cat([torch.arange(n) for n in lengths])}
    return torch.randint(0, TINY["vocab_size"], (tokens,), generator=generator), batch


def padded_batch(lengths: list[int]) -> tuple[torch.Tensor, dict]:
    ids, packed = packed_batch(lengths)
    longest = max(lengths)
    mask = torch.zeros(len(lengths), longest, dtype=torch.long)
    input_ids, segments = torch.zeros_like(mask), torch.zeros_like(mask)
    for row, (start, n) in enumerate(zip(packed["cu_seqlens"][:-1].tolist(), lengths, strict=True)):
        mask[row, :n] = 1
        input_ids[row, :n] = ids[start:start + n]
        segments[row, :n] = packed["token_type_ids"][start:start + n]
    return input_ids, {"attention_mask": mask, "token_type_ids": segments}


def reference(bert: BertModel, ids: torch.Tensor, batch: dict) -> torch.Tensor:
    hidden = encode(bert, ids, batch).last_hidden_state
    return hidden[0] if "cu_seqlens" in batch else hidden


def assert_grads_close(ours: dict[str, torch.Tensor], expected: dict[str, torch.Tensor]) -> None:
    """Each gradient within 1e-5 of the largest entry of the reference's: sums over
    all tokens (the embeddings') round differently in another order. A gradient that
    is zero in exact arithmetic (the key projection's bias: softmax ignores a shift
    common to all of a query's scores) is rounding noise on both sides, held to 1e-7
    of the largest gradient of all (and never less than 1e-7)."""
    assert ours.keys() == expected.keys()
    floor = 1e-7 * max(grad.abs().max().item() for grad in expected.values())
    for name, grad in expected.items():
        error = (ours[name] - grad).abs().max().item()
        assert error <= 1e-5 * grad.abs().max().item() + max(floor, 1e-7), (name, error)


def grads(bert: BertModel, hidden: torch.Tensor, weights: torch.Tensor) -> dict[str, torch.Tensor]:
    bert.zero_grad()
    (hidden * weights).sum().backward()
    return {name: p.grad.clone() for name, p in bert.named_parameters() if p.grad is not None}


@pytest.mark.parametrize(("objectives", "unpad", "shapes"), [("tacl,mlm,nsp", True, 65), ("mirror", True, 129),
                                                           ("tacl,mlm,nsp", False, 256)])
def test_cuda_graphs_expect_one_graph_per_bucket(objectives: str, unpad: bool, shapes: int) -> None:
    """With --cuda-graphs, inductor is told to expect one CUDA graph per shape the
    encoders are given (each token bucket; the mirror objective's doubled batches;
    a padded batch's every length) before it warns, at its default of 8, to pad
    inputs to a few shapes: what the buckets already do. Without it the limit is left
    alone, and a limit someone turned off (None) stays off."""
    from types import SimpleNamespace

    from tacl_scale.config import ResolvedPerformance
    from tacl_scale.parts import compiled_encoders
    from tacl_scale.train import parse_args

    base = ["--ds", "ds_configs/zero2.json", "--data", "d", "--model", "m", "--output", "o",
            "--micro-batch-size", "32", "--objectives", objectives]
    datasets = [SimpleNamespace(manifest=SimpleNamespace(max_seq_len=256))]
    performance = ResolvedPerformance(unpad=unpad, fused_optimizer=False, compile=True)
    student, teacher = SimpleNamespace(bert=tiny_bert()), tiny_bert()
    triton = torch._inductor.config.triton
    for flags, before, after in [([], 8, 8), (["--cuda-graphs"], 8, shapes), (["--cuda-graphs"], None, None),
                                 (["--cuda-graphs"], 1000, 1000)]:
        with torch._inductor.config.patch({"triton.cudagraph_dynamic_shape_warn_limit": before}):
            config = parse_args([*base, *flags])
            fast, _ = compiled_encoders(config, performance, datasets, student, teacher)
            assert fast.cuda_graphs is bool(flags)
            assert (fast.buckets is not None) is unpad
            assert triton.cudagraph_dynamic_shape_warn_limit == after, (flags, before)


# -- buckets (pure arithmetic) ---------------------------------------------------------------------------------

@pytest.mark.parametrize(("micro", "max_len"), [(32, 256), (256, 256), (4, 64), (3, 512), (1, 8)])
def test_buckets_hold_every_micro_batch_in_few_shapes(micro: int, max_len: int) -> None:
    buckets = TokenBuckets.for_batches(micro, max_len)
    sizes = buckets.sizes()
    assert len(sizes) <= 66 and all(size % buckets.step == 0 for size in sizes)
    for tokens in sorted({0, 1, max_len, buckets.capacity // 2, buckets.capacity - 1, buckets.capacity,
                          2 * buckets.capacity}):
        rows = buckets.bucket(tokens)
        assert rows >= tokens + buckets.tail_pieces and rows - tokens <= buckets.step + buckets.tail_pieces
        if tokens <= buckets.capacity:
            assert rows in sizes
        assert rows in buckets.sizes(2 * buckets.capacity)  # the mirror objective's doubled batches
        bounds = [tokens, *buckets.tail_bounds(tokens)]
        pieces = [b - a for a, b in zip(bounds[:-1], bounds[1:], strict=True)]
        assert bounds[-1] == rows and len(pieces) == buckets.tail_pieces
        assert all(1 <= piece <= max_len for piece in pieces), pieces
    # Padding stays a small share of a full micro-batch.
    assert buckets.step <= max(128, buckets.capacity // 32)


def test_the_encoder_cuts_the_tail_where_the_buckets_say() -> None:
    """The padding sequences' offsets are made on the device (no host copy): the
    same as :meth:`TokenBuckets.tail_bounds`."""
    buckets = TokenBuckets.for_batches(32, 256)
    for tokens in (1, 5000, 8192):
        cu = torch.tensor([0, tokens], dtype=torch.int32)
        assert bucket_offsets(buckets, cu, tokens).tolist() == [0, tokens, *buckets.tail_bounds(tokens)]


def test_a_negative_token_count_is_refused() -> None:
    with pytest.raises(ValueError, match="cannot hold"):
        TokenBuckets(64, 16).bucket(-1)


# -- the encoder's forward, eager ------------------------------------------------------------------------------

@pytest.mark.parametrize("layout", ["packed", "padded"])
def test_encoder_forward_is_bert_models(layout: str) -> None:
    """Same parameters, same hidden states and gradients as BertModel (fp32; the
    fused QKV product sums in another order, hence the tolerance)."""
    bert = tiny_bert()
    lengths = [7, 19, 3, 30]
    ids, batch = packed_batch(lengths) if layout == "packed" else padded_batch(lengths)
    expected = reference(bert, ids, batch)
    if layout == "packed":
        ours = encoder_forward(bert, ids, batch["token_type_ids"], batch["position_ids"], batch["cu_seqlens"],
                               batch["max_seqlen"], None, training=False)
    else:
        ours = encoder_forward(bert, ids, batch["token_type_ids"], None, None, 0, batch["attention_mask"],
                               training=False)
    assert ours.shape == expected.shape
    torch.testing.assert_close(ours, expected, rtol=1e-5, atol=1e-5)
    weights = torch.randn(expected.shape, generator=torch.Generator().manual_seed(1))
    if layout == "padded":  # padding rows' outputs are not compared (they attend to real keys)
        weights = weights * batch["attention_mask"][..., None]
    assert_grads_close(grads(bert, ours, weights), grads(bert, expected, weights))


def test_encoder_forward_drops_out_only_while_training() -> None:
    bert = tiny_bert(hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1)
    ids, batch = packed_batch([9, 14])
    args = (ids, batch["token_type_ids"], batch["position_ids"], batch["cu_seqlens"], batch["max_seqlen"], None)
    evaluated = encoder_forward(bert, *args, training=False)
    torch.testing.assert_close(evaluated, reference(bert.eval(), ids, batch), rtol=1e-5, atol=1e-5)
    torch.manual_seed(5)
    first = encoder_forward(bert, *args, training=True)
    torch.manual_seed(5)
    again = encoder_forward(bert, *args, training=True)
    assert torch.equal(first, again) and not torch.allclose(first, evaluated, atol=1e-3)


# -- compiled (inductor on the CPU) ----------------------------------------------------------------------------

@pytest.mark.slow
def test_compiled_encoder_is_one_graph_for_every_bucket_and_matches_bert_model() -> None:
    """``torch.compile`` with ``fullgraph`` (a graph break would raise): after the
    first micro-batch, other token counts, buckets and the mirror objective's doubled
    batches run the same graph (dynamo's counters do not move), and every output and
    gradient is BertModel's. The compiled MLM loss is the eager one."""
    from torch._dynamo.utils import counters

    torch._dynamo.reset()
    counters.clear()
    bert = tiny_bert()
    buckets = TokenBuckets.for_batches(4, 32)
    fast = CompiledEncoder(bert, buckets)
    shapes = [[7, 19, 3, 30], [32, 32, 32, 32], [1, 2, 3, 4], [32, 32, 32, 32, 31, 31, 31, 31]]
    for round_, lengths in enumerate(shapes):
        ids, batch = packed_batch(lengths, seed=round_)
        ours = fast(ids, batch)
        expected = reference(bert, ids, batch)
        torch.testing.assert_close(ours, expected, rtol=1e-5, atol=1e-5)
        weights = torch.randn(expected.shape, generator=torch.Generator().manual_seed(round_))
        assert_grads_close(grads(bert, ours, weights), grads(bert, expected, weights))
        if round_ == 0:
            graphs = counters["stats"]["unique_graphs"]
            assert graphs == 1
    assert len({buckets.bucket(sum(lengths)) for lengths in shapes}) >= 3  # several buckets were run
    # What a --cuda-graphs benchmark reads to know which graphs are recorded.
    assert fast.calls_per_shape == Counter(buckets.bucket(sum(lengths)) for lengths in shapes)
    assert counters["stats"]["unique_graphs"] == graphs, "a bucket or a doubled batch recompiled"
    assert not counters["graph_break"], dict(counters["graph_break"])

    from transformers import BertForPreTraining

    config = BertConfig(**TINY)
    head = BertForPreTraining(config).cls.predictions
    for rows in (5, 9):
        picked = torch.randn(rows, TINY["hidden_size"])
        labels = torch.randint(0, TINY["vocab_size"], (rows,))
        loss, accuracy = fast.masked_lm(head, picked, labels)
        expected_loss, expected_accuracy = masked_lm_loss(head, picked, labels)
        torch.testing.assert_close(loss, expected_loss)
        assert accuracy == expected_accuracy
    assert not counters["graph_break"], dict(counters["graph_break"])


@pytest.mark.slow
def test_compiled_encoder_on_padded_batches_is_one_graph_and_matches_bert_model() -> None:
    """Padded batches (--no-unpad, and --reference-compat, which pads to the maximum
    length) are compiled too on CUDA, by default: other padded lengths run the same
    graph, and the outputs at real tokens and every gradient are BertModel's."""
    from torch._dynamo.utils import counters

    torch._dynamo.reset()
    counters.clear()
    bert = tiny_bert()
    fast = CompiledEncoder(bert, None)
    for round_, lengths in enumerate([[7, 19, 3, 30], [32, 32, 32, 32], [5, 2, 3, 4]]):
        ids, batch = padded_batch(lengths)
        real = batch["attention_mask"][..., None]
        ours, expected = fast(ids, batch), reference(bert, ids, batch)
        torch.testing.assert_close(ours * real, expected * real, rtol=1e-5, atol=1e-5)
        weights = torch.randn(expected.shape, generator=torch.Generator().manual_seed(round_)) * real
        assert_grads_close(grads(bert, ours, weights), grads(bert, expected, weights))
        if round_ == 0:
            graphs = counters["stats"]["unique_graphs"]
            assert graphs == 1
    assert fast.calls_per_shape == Counter({30: 1, 32: 1, 5: 1})
    assert counters["stats"]["unique_graphs"] == graphs, "another padded length recompiled"
    assert not counters["graph_break"], dict(counters["graph_break"])


@pytest.mark.slow
def test_another_model_of_the_same_shape_runs_the_compiled_graph_on_its_own_weights() -> None:
    """A second ``BertModel`` of the same configuration (the GPU check builds a
    Trainer per row of its sweep, in one process) reuses the graph compiled for the
    first: no recompilation, so a row costs its steps, not another compile; and the
    graph reads the second model's parameters (they are the graph's inputs, not
    constants baked into it): its outputs and gradients are its own ``BertModel``'s."""
    from torch._dynamo.utils import counters

    torch._dynamo.reset()
    counters.clear()
    buckets = TokenBuckets.for_batches(4, 32)
    first, second = tiny_bert(), tiny_bert()
    with torch.no_grad():
        for p in second.parameters():
            p.add_(0.1 * torch.randn(p.shape, generator=torch.Generator().manual_seed(p.numel())))
    ids, batch = packed_batch([7, 19, 3, 30])
    CompiledEncoder(first, buckets)(ids, batch)
    graphs = counters["stats"]["unique_graphs"]

    ours = CompiledEncoder(second, buckets)(ids, batch)
    assert counters["stats"]["unique_graphs"] == graphs, "a second model of the same shape recompiled"
    expected = reference(second, ids, batch)
    assert (expected - reference(first, ids, batch)).abs().max() > 1e-2  # the two models differ
    torch.testing.assert_close(ours, expected, rtol=1e-5, atol=1e-5)
    weights = torch.randn(expected.shape, generator=torch.Generator().manual_seed(1))
    assert_grads_close(grads(second, ours, weights), grads(second, expected, weights))


def _kernel_calls(code: str) -> list[str]:
    """The fused kernels that one graph's generated CPU code calls, in order; inductor
    names each after the aten operations it holds (``cpp.descriptive_names``)."""
    return re.findall(r"^\s+(cpp_fused_\w+)\(", code, re.MULTILINE)


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:dynamo_pgo force disabled")  # the price of compiling past every cache
def test_inductor_fuses_each_layers_element_wise_work() -> None:
    """The fusions the compiled encoder exists for, read off the kernels inductor
    generates on the CPU (the matrix products and, on CUDA, the attention are library
    calls, not generated): in training with dropout, every LayerNorm's forward runs
    in one kernel with the dropout and the residual sum before it (the embeddings'
    with their sums), each GELU in one, and no dropout is a pass of its own; in the
    backward, every LayerNorm's backward runs with dropout's in one kernel and each
    GELU's backward in one; the teacher's inference forward sums the residual inside
    each LayerNorm's kernel. A LayerNorm split into two passes, or an operation that
    keeps inductor from fusing across it, changes these counts."""
    from torch._inductor import config as inductor_config
    from torch._inductor.utils import run_and_get_code

    layers = TINY["num_hidden_layers"]
    norms = 1 + 2 * layers  # the embeddings', then two per layer
    torch._dynamo.reset()
    bert = tiny_bert(hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1).train()
    fast = CompiledEncoder(bert, None)
    ids, batch = packed_batch([7, 19, 3, 30])
    # Code comes back only from a compile, not from inductor's on-disk cache.
    with inductor_config.patch({"cpp.descriptive_names": "original_aten", "force_disable_caches": True}):
        _, codes = run_and_get_code(lambda: fast(ids, batch).sum().backward())
        forward, backward = map(_kernel_calls, codes)
        bert.eval()
        with torch.no_grad():
            _, codes = run_and_get_code(lambda: fast(ids, batch))
        (inference,) = map(_kernel_calls, codes)

    norm_kernels = [k for k in forward if "native_layer_norm" in k]
    assert len(norm_kernels) == norms, forward
    assert all("native_dropout" in k and "add" in k for k in norm_kernels), norm_kernels
    assert len([k for k in forward if "gelu" in k]) == layers, forward
    alone = [k for k in forward if "native_dropout" in k and "layer_norm" not in k and "softmax" not in k]
    assert not alone, alone

    norm_backward = [k for k in backward if "native_layer_norm_backward" in k]
    assert len(norm_backward) == norms, backward
    assert all("native_dropout_backward" in k for k in norm_backward), norm_backward
    assert len([k for k in backward if "gelu_backward" in k]) == layers, backward

    inference_norms = [k for k in inference if "native_layer_norm" in k]
    assert len(inference_norms) == norms and all("add" in k for k in inference_norms), inference
    assert not any("dropout" in k for k in inference), inference


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:dynamo_pgo force disabled")
def test_the_compiled_mlm_loss_never_writes_fp32_logits() -> None:
    """The MLM loss in bf16 (DeepSpeed's bf16 head): the cast of the (M, V) logits to
    fp32 is fused into the softmax and the cross entropy's backward, so neither the
    forward nor the backward allocates an fp32 buffer of M × V (at BERT-base's
    vocabulary and ~10k masked rows a step, 1.2 GB written and read for nothing),
    while the loss is the eager one's."""
    from torch._inductor import config as inductor_config
    from torch._inductor.utils import run_and_get_code
    from transformers import BertForPreTraining

    torch._dynamo.reset()
    vocab = TINY["vocab_size"]
    torch.manual_seed(0)
    head = BertForPreTraining(BertConfig(**TINY)).cls.predictions.to(torch.bfloat16)
    fast = CompiledEncoder(tiny_bert(), None)
    picked = torch.randn(37, TINY["hidden_size"], dtype=torch.bfloat16, requires_grad=True)
    labels = torch.randint(0, vocab, (37,))

    def loss_and_backward() -> torch.Tensor:
        loss = fast.masked_lm(head, picked, labels)[0]
        loss.backward()
        return loss

    with inductor_config.patch({"force_disable_caches": True}):
        loss, codes = run_and_get_code(loss_and_backward)
    assert len(codes) == 2, len(codes)  # the forward's graph and the backward's
    shapes = re.findall(r"empty_strided_cpu\(\(([^)]*)\), \([^)]*\), torch\.float32\)", "".join(codes))
    assert shapes, "no fp32 buffer found at all: the pattern no longer matches inductor's code"
    assert not [s for s in shapes if str(vocab) in s.replace(" ", "").split(",")], shapes
    # Inside a fused kernel values stay fp32 where eager rounds each op's output to bf16.
    torch.testing.assert_close(loss, masked_lm_loss(head, picked, labels)[0], rtol=1e-3, atol=0)


# -- the CUDA branch, on fake CUDA tensors ---------------------------------------------------------------------

class _Forward(torch.nn.Module):
    """The encoder of ``bert`` in training, as a module whose parameters
    ``functional_call`` can swap for fake CUDA ones."""

    def __init__(self, bert: BertModel) -> None:
        super().__init__()
        self.bert = bert

    def forward(self, ids: torch.Tensor, segments: torch.Tensor, positions: torch.Tensor,
                cu: torch.Tensor) -> torch.Tensor:
        return encoder_forward(self.bert, ids, segments, positions, cu, 64, None, training=True)


@pytest.mark.skipif(not torch.backends.cuda.is_built(),
                    reason="needs a torch built with CUDA to make fake CUDA tensors (the GPU-image tier's)")
def test_the_cuda_branch_runs_flash_attention() -> None:
    """On (fake) CUDA tensors in bf16 the packed attention is FlashAttention-2's
    varlen ATen op, traced by make_fx without a GPU as dynamo traces it under
    torch.compile. Only the forward: tracing a backward on fake CUDA tensors needs
    a CUDA context (the autograd engine's device threads), so the op's derivative,
    FlashAttention's backward, is exercised by the GPU tests."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.proxy_tensor import make_fx

    module = _Forward(tiny_bert().to(torch.bfloat16))
    ids, batch = packed_batch([40, 24])
    real_params = {name: p.detach() for name, p in module.named_parameters()}
    real_inputs = (ids, batch["token_type_ids"], batch["position_ids"], batch["cu_seqlens"])
    mode = FakeTensorMode()
    params = {name: mode.from_tensor(p) for name, p in real_params.items()}
    buffers = {name: mode.from_tensor(b) for name, b in module.named_buffers()}
    inputs = [mode.from_tensor(t) for t in real_inputs]
    with mode:
        params = {name: p.to("cuda").requires_grad_(True) for name, p in params.items()}
        buffers = {name: b.to("cuda") for name, b in buffers.items()}
        inputs = [t.to("cuda") for t in inputs]
        graph = make_fx(lambda params, *inputs: torch.func.functional_call(module, {**params, **buffers}, inputs))(
            params, *inputs)
    targets = {str(node.target) for node in graph.graph.nodes if node.op == "call_function"}
    assert "aten._flash_attention_forward.default" in targets
    assert not any("searchsorted" in t for t in targets)  # not the CPU's masked attention


def test_cuda_graphs_are_a_compile_of_their_own() -> None:
    """--cuda-graphs compiles the encoder with reduce-overhead under another code
    object (dynamo's cache never hands one mode's graph to the other), and needs
    --compile."""
    from tacl_scale.config import ConfigError, PerformanceConfig
    from tacl_scale.encoder import compiled
    from tacl_scale.train import parse_args

    bert = tiny_bert()
    plain, graphed = CompiledEncoder(bert, None), CompiledEncoder(bert, None, cuda_graphs=True)
    assert plain.forward is compiled("encoder_forward") and graphed.forward is compiled("encoder_forward_graphed")
    assert plain.forward is not graphed.forward and graphed.cuda_graphs and not plain.cuda_graphs
    with pytest.raises(ConfigError, match="--cuda-graphs needs --compile"):
        PerformanceConfig(compile=False, cuda_graphs=True)
    base = ["--ds", "ds_configs/zero2.json", "--data", "d", "--model", "m", "--output", "o", "--cuda-graphs"]
    assert parse_args(base).performance.cuda_graphs
    with pytest.raises(ConfigError, match="--cuda-graphs needs --compile"):
        parse_args([*base, "--no-compile"])
