"""The CUDA path: unpadded attention and TaCL loss against the padded path, 1-rank
training with the documented fp16 and bf16 configs (NCCL), resume, and the export
of the fp32 master weights. Skipped without a GPU; ``scripts/gpu_check.sh`` runs
this file on one, with the offline bundle of ``scripts/build_gpu_bundle.sh``
(``GPU_BUNDLE``, default ``.gpu_bundle``) for its dataset."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import pytest
import torch
from conftest import ROOT

pytestmark = [pytest.mark.gpu, pytest.mark.framework,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")]

BUNDLE = Path(os.environ.get("GPU_BUNDLE", ROOT / ".gpu_bundle"))
SMALL_BERT = {"vocab_size": 30522, "hidden_size": 128, "num_hidden_layers": 2, "num_attention_heads": 2,
              "intermediate_size": 512, "max_position_embeddings": 512}


@pytest.fixture(scope="module")
def bundle_data() -> Path:
    info = BUNDLE / "bundle.json"
    if not info.is_file():
        pytest.fail(f"{info} missing: build the bundle with scripts/build_gpu_bundle.sh")
    return BUNDLE / json.loads(info.read_text())["dataset"]


def config_for(data: Path, model: Path, output: Path, ds: str, steps: int, resume: bool = False,
               stop_after_steps: int | None = None, precision: str | None = None, compile: bool = False,
               cuda_graphs: bool = False):
    """A 1-GPU run's settings; eager unless ``compile`` (each compiled Trainer costs
    the check seconds of compilation: the tests about compiling ask for it)."""
    from tacl_scale.config import (
        CheckpointConfig,
        DataConfig,
        EngineConfig,
        OptimConfig,
        PerformanceConfig,
        TrainConfig,
    )

    return TrainConfig(
        model=str(model), output=str(output), engine=EngineConfig.from_file(ROOT / "ds_configs" / ds),
        data=DataConfig((str(data),), num_workers=2),
        optim=OptimConfig(steps=steps, lr=1e-3, warmup_ratio=0.1, batch_size=32, micro_batch_size=16),
        checkpoint=CheckpointConfig(save_every=1000, resume=resume, stop_after_steps=stop_after_steps),
        performance=PerformanceConfig(precision=precision, compile=compile, cuda_graphs=cuda_graphs), eval_every=0,
        log_every=5,
    )


@pytest.fixture(scope="module")
def model_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("model") / "bert.json"
    path.write_text(json.dumps(SMALL_BERT))
    return path


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_unpadded_model_matches_padded_on_cuda(bundle_data: Path, model_file: Path, dtype: torch.dtype) -> None:
    """FlashAttention varlen over packed real tokens gives the SDPA padded path's
    losses (eval mode, same weights)."""
    from tacl_scale.data import PretrainDataset
    from tacl_scale.data.loader import CollateConfig, collate, to_device
    from tacl_scale.model import ObjectiveConfig, make_teacher, pretraining_losses, teacher_states
    from tacl_scale.pretrained import load_student

    torch.manual_seed(0)
    student = load_student(model_file).to("cuda", dtype).eval()
    teacher = make_teacher(student, "bf16" if dtype == torch.bfloat16 else "fp16", torch.device("cuda"))
    data = PretrainDataset(bundle_data)
    items = [data[i] for i in range(0, len(data), len(data) // 24)][:24]
    assert len({len(i["original_ids"]) for i in items}) > 1  # real, ragged lengths
    losses = []
    for unpad in (False, True):
        batch = to_device(collate(items, CollateConfig(unpad=unpad)), "cuda")
        with torch.no_grad():
            parts = pretraining_losses(student, batch, ObjectiveConfig(), teacher_states(teacher, batch))
        losses.append({k: v.item() for k, v in parts.items()})
    for key in ("loss", "tacl", "mlm", "nsp"):
        assert losses[1][key] == pytest.approx(losses[0][key], rel=2e-2, abs=2e-2), key


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_mirror_unpadded_matches_padded_on_cuda(bundle_data: Path, model_file: Path, dtype: torch.dtype) -> None:
    """The sentence-level objective (model-1's mirror part) through FlashAttention
    varlen over both packed views gives the padded path's loss and sentence vectors."""
    from tacl_scale.config import MirrorConfig
    from tacl_scale.data import PretrainDataset
    from tacl_scale.data.loader import CollateConfig, collate, to_device
    from tacl_scale.data.views import MirrorViews
    from tacl_scale.mirror import both_views, pool
    from tacl_scale.model import encode, mirror_loss
    from tacl_scale.pretrained import load_student

    torch.manual_seed(0)
    student = load_student(model_file).to("cuda", dtype).eval()
    data = PretrainDataset(bundle_data)
    views = MirrorViews.for_manifest(data.manifest, 0, 2)
    items = [views.apply(data[i], 0, i) for i in range(0, len(data), len(data) // 24)][:24]
    losses, vectors = [], []
    for unpad in (False, True):
        batch = to_device(collate(items, CollateConfig(unpad=unpad)), "cuda")
        with torch.no_grad():
            losses.append(mirror_loss(student.bert, batch, MirrorConfig(pooling="mean"))[0].item())
            ids, doubled = both_views(batch)
            hidden = encode(student.bert, ids, doubled).last_hidden_state
            vectors.append(pool(hidden[0] if unpad else hidden, doubled, "mean").float())
    assert losses[1] == pytest.approx(losses[0], rel=2e-2, abs=2e-2)
    assert torch.allclose(vectors[1], vectors[0], rtol=5e-2, atol=5e-2)


def test_one_gpu_model_1_trains(join, bundle_data: Path, model_file: Path, tmp_path: Path) -> None:
    """MLM + NSP + mirror on one GPU, bf16, unpadded: finite losses, the mirror
    loss among them, and the contrastive objective learning (over 15 steps its
    accuracy rises, or its loss falls where the accuracy starts at its ceiling)."""
    from dataclasses import replace

    from tacl_scale.model import ObjectiveConfig
    from tacl_scale.trainer import Trainer

    config = replace(config_for(bundle_data, model_file, tmp_path / "run", "zero2_bf16.json", steps=15),
                     objective=ObjectiveConfig(("mlm", "nsp", "mirror")), export=False)
    trainer = Trainer.build(config, join())
    try:
        assert trainer.parts.performance.unpad and trainer.parts.teacher is None
        history = trainer.train()
    finally:
        trainer.close()
    assert all(math.isfinite(m[key]) for m in history for key in ("loss", "mlm", "nsp", "mirror", "mirror_acc"))
    first, last = history[:5], history[-5:]
    accuracy_rose = sum(m["mirror_acc"] for m in last) > sum(m["mirror_acc"] for m in first)
    loss_fell = sum(m["mirror"] for m in last) < sum(m["mirror"] for m in first)
    assert accuracy_rose or loss_fell, [(m["mirror"], m["mirror_acc"]) for m in history]


@pytest.mark.parametrize(("ds", "precision"), [("zero2.json", "fp16"), ("zero2.json", None),
                                               ("zero2_bf16.json", None), ("zero1_bf16.json", None)])
def test_one_gpu_training_lowers_the_loss_and_exports_masters(join, bundle_data: Path, model_file: Path,
                                                               tmp_path: Path, ds: str, precision: str | None) -> None:
    """Each documented config on one GPU: the paper's fp16 (loss scaling),
    zero2.json's auto (bf16 here, compiled as the README runs it), bf16 ZeRO-2 and
    ZeRO-1, all accumulating gradients in fp32; the export holds the fp32 masters."""
    from deepspeed.utils import safe_get_full_fp32_param
    from transformers import BertForPreTraining

    from tacl_scale.trainer import Trainer

    readme = ds == "zero2.json" and precision is None  # the README's config, as users run it: compiled
    config = config_for(bundle_data, model_file, tmp_path / "run", ds, steps=20, precision=precision,
                        compile=readme)
    trainer = Trainer.build(config, join())
    try:
        assert trainer.dist.device == torch.device("cuda", 0) and trainer.parts.performance.unpad
        assert trainer.parts.precision == (precision or "bf16") and (trainer.parts.engine.module.fast is not None) is readme
        assert trainer.parts.engine.ds_config["zero_optimization"].get("overlap_comm", False) is False  # one rank
        assert trainer.parts.engine.optimizer.defaults["fused"] is True
        assert trainer.engine.get_data_types()[1] == torch.float32
        assert next(trainer.parts.teacher.parameters()).device == trainer.dist.device
        history = trainer.train()
        masters = {n[len("student."):]: safe_get_full_fp32_param(p).detach().cpu()
                   for n, p in trainer.engine.module.named_parameters()}
    finally:
        trainer.close()
    assert [m["step"] for m in history] == list(range(1, 21))
    early = sum(m["loss"] for m in history[:5]) / 5
    late = sum(m["loss"] for m in history[-5:]) / 5
    assert late < early, (early, late)
    assert all("mfu" in m and m["mfu"] > 0 for m in history)
    exported = BertForPreTraining.from_pretrained(tmp_path / "run" / "export").state_dict()
    for name, master in masters.items():
        assert torch.equal(exported[name], master), name


def test_resume_on_gpu_continues_the_run(join, bundle_data: Path, model_file: Path, tmp_path: Path) -> None:
    """A run stopped after step 3 and resumed matches the uninterrupted run, within
    the run-to-run noise of CUDA's non-deterministic backward kernels (atomics in
    the attention and embedding gradients; on CPU the tests ask for equality)."""
    from tacl_scale.trainer import Trainer

    histories = {}
    for name, stop in (("straight", None), ("resumed", 3)):
        trainer = Trainer.build(config_for(bundle_data, model_file, tmp_path / name, "zero2_bf16.json", steps=6,
                                     stop_after_steps=stop), join())
        try:
            histories[name] = trainer.train()
        finally:
            trainer.close()
    trainer = Trainer.build(config_for(bundle_data, model_file, tmp_path / "resumed", "zero2_bf16.json", steps=6,
                                 resume=True), join())
    try:
        assert trainer.state.step == 3
        histories["resumed"] += trainer.train()
    finally:
        trainer.close()
    straight, resumed = histories["straight"], histories["resumed"]
    assert [m["step"] for m in resumed] == [1, 2, 3, 4, 5, 6]
    for a, b in zip(straight, resumed, strict=True):
        assert b["loss"] == pytest.approx(a["loss"], rel=2e-3), a["step"]


@pytest.mark.parametrize("layout", ["packed", "padded"])
def test_the_tacl_loss_never_waits_for_the_gpu(bundle_data: Path, layout: str) -> None:
    """Forward and backward of the fused loss with the collate's MaskedRows under
    CUDA's sync debug mode "error": any read back to the host (.item(), nonzero,
    a blocking copy) raises."""
    from tacl_scale.data import PretrainDataset
    from tacl_scale.data.loader import CollateConfig, collate, to_device
    from tacl_scale.kernels import tacl_loss, tacl_loss_packed

    data = PretrainDataset(bundle_data)
    items = [data[i] for i in range(32)]
    batch = to_device(collate(items, CollateConfig(unpad=layout == "packed")), "cuda")
    shape = (*batch["input_ids"].shape, 768)
    student = torch.randn(shape, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    teacher = torch.randn(shape, device="cuda", dtype=torch.float16)
    rows = batch["tacl_rows"]
    args = (batch["cu_seqlens"],) if layout == "packed" else (batch["attention_mask"],)
    loss_fn = tacl_loss_packed if layout == "packed" else tacl_loss
    loss_fn(student, teacher, batch["masked"], *args, 0.01, "triton", rows)[0].backward()  # compile first
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        loss, correct, count = loss_fn(student, teacher, batch["masked"], *args, 0.01, "triton", rows)
        loss.backward()
    finally:
        torch.cuda.set_sync_debug_mode("default")
    assert count.item() == rows.num_masked and torch.isfinite(loss)


@pytest.mark.parametrize("graphs", [False, True], ids=["compiled", "cuda-graphs"])
def test_compiled_training_gives_the_eager_losses(join, bundle_data: Path, tmp_path: Path, graphs: bool) -> None:
    """--compile (and --compile --cuda-graphs) against --no-compile on one GPU in
    bf16, packed, with gradient accumulation, a model without dropout (the compiled
    graph draws its own masks): the same losses within bf16's tolerance, step by step.
    One test per compiled variant, so each compiles once within the per-test limit
    of a cold machine's check."""
    from dataclasses import replace

    from tacl_scale.trainer import Trainer

    model = tmp_path / "bert.json"
    model.write_text(json.dumps({**SMALL_BERT, "hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0}))
    histories = {}
    for name, compiled in (("eager", False), ("compiled", True)):
        config = config_for(bundle_data, model, tmp_path / name, "zero1_bf16.json", steps=6, compile=compiled,
                            cuda_graphs=graphs and compiled)
        trainer = Trainer.build(replace(config, export=False), join())
        try:
            assert (trainer.parts.engine.module.fast is not None) is compiled and trainer.parts.precision == "bf16"
            assert trainer.cuda_graphs is (graphs and compiled) and trainer.parts.engine.accumulation == 2
            histories[name] = trainer.train()
        finally:
            trainer.close()
    for eager, ours in zip(histories["eager"], histories["compiled"], strict=True):
        for key in ("loss", "tacl", "mlm", "nsp"):
            assert ours[key] == pytest.approx(eager[key], rel=3e-2, abs=3e-2), (eager["step"], key)


@pytest.mark.parametrize("ds", ["zero1_bf16.json", "zero2_bf16.json"])
def test_a_micro_batch_never_waits_for_the_gpu(join, bundle_data: Path, model_file: Path, tmp_path: Path,
                                              ds: str) -> None:
    """After warm-up, a micro-batch inside a step (batch to the device, compiled
    teacher and student, the losses, backward) under CUDA's sync debug mode
    "error": any wait for the GPU raises. The optimizer step is DeepSpeed's and
    reads the gradient norm on the host once per step (its skip-on-overflow check)."""
    from tacl_scale.model import teacher_states
    from tacl_scale.trainer import Trainer, micro_batch_seed

    trainer = Trainer.build(config_for(bundle_data, model_file, tmp_path / "run", ds, steps=100, compile=True),
                            join())
    try:
        assert trainer.parts.engine.accumulation == 2 and trainer.parts.engine.module.fast is not None
        for _ in range(3):
            trainer.train_step().read()
        cpu_batch = next(trainer.parts.batches)
        torch.cuda.synchronize()
        torch.cuda.set_sync_debug_mode("error")
        try:
            torch.manual_seed(micro_batch_seed(1, cpu_batch["micro_batch"]))
            batch = trainer.dist.move(cpu_batch)
            hidden = teacher_states(trainer.parts.teacher, batch, fast=trainer.parts.teacher_fast)
            parts = trainer.engine(batch, hidden)
            trainer.engine.backward(parts["loss"])
            values = torch.stack([parts[k].detach().float() for k in sorted(parts)])
        finally:
            torch.cuda.set_sync_debug_mode("default")
        assert torch.isfinite(values).all()
    finally:
        trainer.close()


def test_cuda_graph_replays_draw_the_dropout_of_their_micro_batch() -> None:
    """--cuda-graphs with dropout on (the loss comparisons run without it): a
    replayed graph draws its dropout masks from the generator as the trainer seeds
    it for each micro-batch, not the masks it was recorded with. The same seed
    gives the same hidden states, another seed other ones."""
    from collections import Counter

    from test_encoder import packed_batch, tiny_bert

    from tacl_scale.data.buckets import TokenBuckets
    from tacl_scale.encoder import CompiledEncoder, new_micro_batch

    bert = tiny_bert(hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1).to("cuda", torch.bfloat16).train()
    ids, batch = packed_batch([40, 24])
    ids = ids.cuda()
    batch = {key: value.cuda() if torch.is_tensor(value) else value for key, value in batch.items()}
    encoder = CompiledEncoder(bert, TokenBuckets(128, 64), cuda_graphs=True)

    def micro_batch(seed: int) -> torch.Tensor:
        new_micro_batch()
        torch.manual_seed(seed)
        hidden = encoder(ids, batch)
        hidden.float().square().sum().backward()
        bert.zero_grad(set_to_none=True)  # no gradient outlives its graph's generation (as in training)
        return hidden.detach().clone()

    micro_batch(1), micro_batch(2)  # a shape's first call runs eagerly, its second records the graph
    first, again, other = micro_batch(1), micro_batch(1), micro_batch(2)  # replays
    assert encoder.calls_per_shape == Counter({TokenBuckets(128, 64).bucket(64): 5})
    assert torch.isfinite(first).all()
    torch.testing.assert_close(again, first, rtol=0, atol=0)
    assert not torch.equal(other, first), "a replay drew the same dropout masks under another seed"
