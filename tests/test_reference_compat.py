"""``--reference-compat``: the paper's released training code instead of Eq. 1 as
written. Its TaCL loss equals a float64 transcription of the released
``label_smoothed_nll_loss`` (padding columns as negatives) in loss, accuracy and
gradient, for both implementations; the teacher's dropout is on, from a stream of
its own; the command line sets what the mode needs and refuses what contradicts it;
a run records the mode, resumes with the same losses and refuses a resume without it."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from conftest import ZH_TEXT, ZH_VOCAB, build_dataset
from test_tacl_triton import HALF_TOLERANCES

from tacl_scale.config import (
    CheckpointConfig,
    ConfigError,
    DataConfig,
    EngineConfig,
    OptimConfig,
    TrainConfig,
)
from tacl_scale.distributed import Distributed
from tacl_scale.kernels import tacl_loss
from tacl_scale.model import ObjectiveConfig, make_teacher, teacher_states
from tacl_scale.trainer import Trainer, TrainError

pytestmark = pytest.mark.framework

TINY_BERT = {"vocab_size": 21128, "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2,
             "intermediate_size": 64, "max_position_embeddings": 64}
FP32 = {"zero_optimization": {"stage": 2}}


def released_loss(student: torch.Tensor, teacher: torch.Tensor, masked: torch.Tensor,
                  temperature: float) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``label_smoothed_nll_loss`` of yxuansu/TaCL ``pretraining/bert_contrastive.py``
    with its cosine scores, in float64: every one of the ``seqlen`` columns is a
    candidate, and the rows weighted by the masked positions (``contrastive_labels``)."""
    s = student.double()
    t = teacher.double()
    s = s / s.norm(dim=2, keepdim=True)
    t = t / t.norm(dim=2, keepdim=True)
    scores = torch.matmul(s, t.transpose(1, 2)) / temperature  # bsz x seqlen x seqlen
    bsz, seqlen, _ = scores.size()
    logprobs = F.log_softmax(scores.view(-1, seqlen), dim=-1)
    gold = torch.arange(seqlen).view(-1).expand(bsz, seqlen).contiguous().view(-1)
    labels = masked.double()
    loss = -logprobs.gather(dim=-1, index=gold.unsqueeze(1)).squeeze(1)
    loss = torch.sum(loss.view(bsz, seqlen) * labels) / labels.sum()
    _, pred = torch.max(logprobs, -1)
    correct = torch.sum(torch.eq(gold, pred).double().view(bsz, seqlen) * labels)
    return loss, correct, labels.sum()


def padded_batch(dtype: torch.dtype, lengths: tuple[int, ...] = (24, 17, 9), dim: int = 32, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    batch, length = len(lengths), max(lengths)
    student = torch.randn(batch, length, dim, generator=g).to(dtype)
    teacher = (0.25 * student.float() + torch.randn(batch, length, dim, generator=g)).to(dtype)
    attention = (torch.arange(length)[None, :] < torch.tensor(lengths)[:, None]).long()
    masked = (torch.rand(batch, length, generator=g) < 0.3) & attention.bool()
    masked[:, 1] = True  # every sequence has one
    return student, teacher, masked, attention


@pytest.mark.parametrize("impl", ["torch", "triton"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("temperature", [0.01, 0.1])
def test_the_loss_equals_the_released_codes(impl: str, dtype: torch.dtype, temperature: float) -> None:
    student, teacher, masked, attention = padded_batch(dtype)
    student.requires_grad_(True)
    loss, correct, count = tacl_loss(student, teacher, masked, attention, temperature, impl=impl,
                                     padding_negatives=True)
    loss.backward()
    ours = student.grad.double()
    student64 = student.detach().double().requires_grad_(True)
    expected, expected_correct, expected_count = released_loss(student64, teacher.detach(), masked, temperature)
    expected.backward()
    reference = student64.grad.to(dtype).double()  # rounded as ours is
    if impl == "triton" and dtype != torch.float32:
        # The kernel feeds ŝ and t̂ to the tensor cores in the input's precision: the
        # fused kernel's own half-precision tolerances (tests/test_tacl_triton.py).
        loss_tol, grad_tol = HALF_TOLERANCES[(dtype, temperature)]
        assert loss.item() == pytest.approx(expected.item(), rel=loss_tol, abs=loss_tol)
        assert abs(int(correct) - int(expected_correct)) <= max(1, int(expected_count) // 20)
        assert float((ours - student64.grad).norm() / student64.grad.norm()) < grad_tol
    else:
        assert loss.item() == pytest.approx(expected.item(), rel=2e-5, abs=1e-6)
        assert int(correct) == int(expected_correct)
        tolerance = {torch.float32: 1e-4, torch.float16: 2e-3, torch.bfloat16: 1.6e-2}[dtype]
        torch.testing.assert_close(ours, reference, rtol=tolerance, atol=tolerance * reference.abs().max().item())
    assert int(count) == int(expected_count) and expected.item() > 0.5  # a batch with something to learn
    # Eq. 1 as written differs on this batch, which has padding: the mode is not a no-op.
    plain, _, _ = tacl_loss(student.detach(), teacher, masked, attention, temperature, impl=impl)
    assert abs(plain.item() - loss.item()) > 1e-4


def test_without_padding_the_two_losses_agree() -> None:
    student, teacher, masked, attention = padded_batch(torch.float32, lengths=(20, 20))
    compat = tacl_loss(student, teacher, masked, attention, 0.01, impl="torch", padding_negatives=True)
    plain = tacl_loss(student, teacher, masked, attention, 0.01, impl="torch")
    assert compat[0].item() == pytest.approx(plain[0].item(), rel=1e-6)


def test_the_teachers_dropout_comes_from_its_own_stream() -> None:
    from transformers import BertConfig, BertForPreTraining

    student = BertForPreTraining(BertConfig(**TINY_BERT, hidden_dropout_prob=0.3))
    teacher = make_teacher(student, "fp32", torch.device("cpu"))
    ids = torch.randint(200, 2000, (2, 12))
    batch = {"original_ids": ids, "attention_mask": torch.ones_like(ids), "token_type_ids": torch.zeros_like(ids)}
    torch.manual_seed(5)
    before = torch.get_rng_state()
    first, again, other = (teacher_states(teacher, batch, seed) for seed in (11, 11, 12))
    assert torch.equal(torch.get_rng_state(), before)  # the student's stream is untouched
    assert not teacher.training  # back to eval mode
    assert torch.equal(first, again) and not torch.equal(first, other)
    assert not torch.equal(first, teacher_states(teacher, batch))  # eval mode: no dropout


def test_the_command_line_sets_what_the_mode_needs_and_refuses_the_rest(tmp_path: Path) -> None:
    from tacl_scale.train import parse_args

    ds = tmp_path / "ds.json"
    ds.write_text(json.dumps(FP32))
    base = ["--ds", str(ds), "--data", "d", "--model", "m", "--output", str(tmp_path / "run")]
    config = parse_args([*base, "--reference-compat"])
    assert config.objective.reference_compat and config.data.pad_to_max_length
    assert config.performance.unpad is False and config.performance.teacher_dtype == "fp32"
    assert not parse_args(base).objective.reference_compat
    contradictions = [(["--unpad"], "cannot run with --unpad"),
                      (["--teacher-dtype", "fp16"], "runs the teacher in fp32, as the released code: not "
                                                    "--teacher-dtype fp16")]
    for flags, message in contradictions:
        with pytest.raises(ConfigError, match=re.escape(message)):
            parse_args([*base, "--reference-compat", *flags])


def test_a_config_built_in_code_gets_what_the_mode_needs(tmp_path: Path) -> None:
    """Only the command line set the mode's padding and fp32 teacher: a TrainConfig
    built in code with reference_compat failed when the run was built."""
    from tacl_scale.config import PerformanceConfig

    config = TrainConfig(model="m", output=str(tmp_path / "run"), engine=EngineConfig("inline.json", FP32),
                         data=DataConfig(("d",)), objective=ObjectiveConfig(reference_compat=True))
    assert config.data.pad_to_max_length and config.performance.unpad is False
    assert config.performance.teacher_dtype == "fp32"
    with pytest.raises(ConfigError, match="cannot run with --unpad"):
        replace(config, performance=PerformanceConfig(unpad=True))


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_dataset(tmp_path_factory.mktemp("compat") / "ds", "--input", str(ZH_TEXT), "--format", "text",
                         "--language", "zh", "--tokenizer", str(ZH_VOCAB), "--min-doc-chars", "10",
                         "--dupe-factor", "1", "--max-seq-len", "64")


def compat_config(dataset: Path, model: Path, output: Path, **checkpoint) -> TrainConfig:
    from tacl_scale.config import PerformanceConfig

    return TrainConfig(
        model=str(model), output=str(output), engine=EngineConfig("inline.json", FP32),
        data=DataConfig((str(dataset),), num_workers=0, pad_to_max_length=True),
        objective=ObjectiveConfig(reference_compat=True),
        optim=OptimConfig(steps=4, lr=1e-3, warmup_ratio=0.5, batch_size=4, micro_batch_size=2),
        checkpoint=CheckpointConfig(save_every=100, **checkpoint),
        performance=PerformanceConfig(unpad=False, teacher_dtype="fp32"), eval_every=0, log_every=1, export=False)


def test_a_compat_run_is_recorded_resumes_exactly_and_refuses_a_plain_resume(
        join: Callable[[], Distributed], dataset: Path, tmp_path: Path) -> None:
    model = tmp_path / "bert.json"
    model.write_text(json.dumps({**TINY_BERT, "hidden_dropout_prob": 0.2}))
    losses: dict[str, list[float]] = {}
    for name, stop, resume in (("straight", None, False), ("resumed", 2, False), ("resumed", None, True)):
        trainer = Trainer.build(compat_config(dataset, model, tmp_path / name, resume=resume, stop_after_steps=stop),
                                join())
        try:
            losses.setdefault(name, []).extend(m["loss"] for m in trainer.train())
        finally:
            trainer.close()
    assert len(losses["straight"]) == 4 and losses["resumed"] == losses["straight"]
    run = json.loads((tmp_path / "straight" / "run.json").read_text())
    assert run["config"]["objective"]["reference_compat"] is True
    plain = compat_config(dataset, model, tmp_path / "straight", resume=True)
    plain = replace(plain, objective=ObjectiveConfig(), optim=replace(plain.optim, steps=6))
    with pytest.raises(TrainError, match="objective.reference_compat: True -> False"):
        Trainer.build(plain, join())
