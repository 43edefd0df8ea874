"""The Trainer in-process on one gloo rank (no launcher): the train step, step
accounting when DeepSpeed skips an update, export from the fp32 master weights of a
bf16 run, the fused optimizer, unpadded batches, and the pure pieces (config
resolution, the device owner)."""

from __future__ import annotations

import gc
import json
import logging
import os
import re
import shutil
import time as time_module
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest
import torch
from conftest import LAUNCHER_VARIABLES, ROOT, TINY_BERT, ZH_TEXT, ZH_VOCAB, build_dataset, shipped_ds_configs

from tacl_scale.cli import UsageError
from tacl_scale.config import (
    CheckpointConfig,
    ConfigError,
    DataConfig,
    EngineConfig,
    OptimConfig,
    PerformanceConfig,
    TrainConfig,
)
from tacl_scale.data import PretrainDataset
from tacl_scale.distributed import Distributed, DistributedError, LaunchEnv
from tacl_scale.engine_config import deepspeed_config
from tacl_scale.metrics import read_records, step_records
from tacl_scale.model import ObjectiveConfig
from tacl_scale.run_dir import RunDir
from tacl_scale.trainer import Trainer, TrainError

pytestmark = pytest.mark.framework  # also run on the GPU image's versions (scripts/test.sh --gpu-image)

FP32 = {"zero_optimization": {"stage": 2}}
BF16 = {"zero_optimization": {"stage": 2}, "bf16": {"enabled": True}}


@pytest.fixture(scope="module")
def dataset(zh_dataset: Path) -> Path:
    return zh_dataset


@pytest.fixture(scope="module")
def model_file(tiny_bert_file: Path) -> Path:
    return tiny_bert_file


@pytest.mark.parametrize("steps, warmup_ratio", [(10, 0.3), (10, 0.0), (7, 1.0), (1, 0.0), (1000, 0.06)])
def test_linear_schedule_peaks_once(steps: int, warmup_ratio: float) -> None:
    """The lr rises linearly to its peak, used by exactly one update (the warm-up's
    last), then falls linearly to a last update above 0, and to 0 after it."""
    optim = OptimConfig(steps=steps, warmup_ratio=warmup_ratio)
    warmup = max(1, int(warmup_ratio * steps))
    factors = [optim.lr_factor(k) for k in range(steps)]
    assert factors.count(1.0) == 1 and factors.index(1.0) == warmup - 1
    assert factors[:warmup] == pytest.approx([(k + 1) / warmup for k in range(warmup)])
    decay = factors[warmup - 1:]
    steps_down = [a - b for a, b in zip(decay[:-1], decay[1:], strict=True)]
    assert steps_down == pytest.approx([1 / (steps - warmup + 1)] * (steps - warmup))
    assert factors[-1] > 0 and optim.lr_factor(steps) == 0.0


def test_constant_schedule_holds_the_peak_after_warmup() -> None:
    optim = OptimConfig(steps=10, warmup_ratio=0.3, schedule="constant")
    assert [optim.lr_factor(k) for k in range(10)] == pytest.approx([1 / 3, 2 / 3] + [1.0] * 8)


def make_config(dataset: Path, model: Path, output: Path, steps: int = 4, settings: dict | None = None,
                **overrides) -> TrainConfig:
    config = TrainConfig(
        model=str(model), output=str(output), engine=EngineConfig("inline.json", settings or FP32),
        data=DataConfig((str(dataset),), num_workers=0),
        optim=OptimConfig(steps=steps, lr=1e-3, warmup_ratio=0.5, batch_size=4, micro_batch_size=2),
        checkpoint=CheckpointConfig(save_every=100), eval_every=0, log_every=1,
    )
    return replace(config, **overrides)


def run_job(config: TrainConfig, join: Callable[[], Distributed]) -> list[dict[str, float]]:
    """One job of a run in this process: built, trained to its end, closed."""
    trainer = Trainer.build(config, join())
    try:
        return trainer.train()
    finally:
        trainer.close()


def test_train_step_in_process(join: Callable[[], Distributed], dataset: Path, model_file: Path, tmp_path: Path) -> None:
    import math

    trainer = Trainer.build(make_config(dataset, model_file, tmp_path / "run", export=False), join())
    try:
        assert trainer.parts.engine.accumulation == 2
        assert trainer.parts.teacher is not None and next(trainer.parts.teacher.parameters()).device == trainer.dist.device
        result = trainer.train_step()
        assert result.applied and trainer.state.step == 1 and trainer.state.consumed_samples == 4
        for key in ("loss", "tacl", "mlm", "nsp", "tacl_acc", "lr", "grad_norm", "samples_per_s", "tokens_per_s"):
            assert key in result.metrics and math.isfinite(result.metrics[key]), (key, result.metrics.get(key))
        assert result.metrics["loss"] == pytest.approx(
            result.metrics["tacl"] + result.metrics["mlm"] + result.metrics["nsp"], rel=1e-5)
        # the lr logged is the one the update used: step 0 of the warm-up
        assert result.metrics["lr"] == pytest.approx(1e-3 * trainer.config.optim.lr_factor(0))
        assert trainer.parts.engine.scheduler.get_last_lr()[0] == pytest.approx(1e-3 * trainer.config.optim.lr_factor(1))
        run = json.loads((tmp_path / "run" / "run.json").read_text())
        assert run["student_config"]["hidden_size"] == 32 and run["unpad"] is False
        assert (tmp_path / "run" / "tokenizer" / "vocab.txt").is_file()
    finally:
        trainer.close()


def test_a_step_never_waits_for_the_whole_device(join: Callable[[], Distributed], dataset: Path, model_file: Path,
                                                tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """DeepSpeed's throughput timer, on unless the config turns it off, called the
    accelerator's synchronize() at every micro-batch's forward and at every step
    from the second on: on a GPU, every micro-batch waited for the device. CUDA's
    sync debug mode does not see synchronize(), so it is counted here, on the CPU
    accelerator, where the same calls are made."""
    from deepspeed.accelerator import get_accelerator

    trainer = Trainer.build(make_config(dataset, model_file, tmp_path / "run", steps=6, export=False), join())
    assert trainer.engine.gradient_accumulation_steps() == 2
    calls = []
    accelerator = get_accelerator()
    # An engine an earlier test left to the cyclic garbage collector calls synchronize()
    # when it is destroyed (DeepSpeedEngine.__del__ -> the ZeRO optimizer's destroy());
    # collected during these steps, it was counted as theirs: collect first, and not during.
    gc.collect()
    monkeypatch.setattr(accelerator, "synchronize", lambda *args, **kwargs: calls.append(trainer.state.step))
    gc.disable()
    try:
        while trainer.state.step < 5:
            trainer.train_step()
    finally:
        gc.enable()
    assert calls == []


def test_the_last_checkpoint_is_saved_while_the_export_is_written_and_no_save_is_timed_as_a_step(
        join: Callable[[], Distributed], dataset: Path, model_file: Path, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """train() saved the last step's checkpoint in its loop, so export()'s save,
    meant to overlap the export's writing, had nothing left to do: the end of a run
    was the two one after the other. And a save's time went into the throughput of
    the steps logged after it. Here each save takes 1000 s of a stand-in clock."""
    import threading
    from types import SimpleNamespace

    import tacl_scale.trainer as trainer_module

    offset = [0.0]
    monkeypatch.setattr(trainer_module, "time", SimpleNamespace(monotonic=lambda: time_module.monotonic() + offset[0]))
    steps, saves, last_save, exporting = 6, [], threading.Event(), threading.Event()
    real_save, real_export = trainer_module.checkpoint.save, trainer_module.export_weights
    overlapped = []

    def save(engine, root, step, *args, **kwargs):
        saves.append(step)
        if step == steps:
            last_save.set()
            overlapped.append(exporting.wait(timeout=10))  # the export is being written meanwhile
        offset[0] += 1000.0
        return real_save(engine, root, step, *args, **kwargs)

    def export(*args, **kwargs):
        exporting.set()
        overlapped.append(last_save.wait(timeout=30))  # and the last save is made meanwhile
        return real_export(*args, **kwargs)

    monkeypatch.setattr(trainer_module.checkpoint, "save", save)
    monkeypatch.setattr(trainer_module, "export_weights", export)
    config = make_config(dataset, model_file, tmp_path / "run", steps=steps, log_every=2)
    trainer = Trainer.build(replace(config, checkpoint=CheckpointConfig(save_every=2)), join())
    try:
        history = trainer.train()
    finally:
        trainer.close()
    assert saves == [2, 4, 6] and overlapped == [True, True]
    assert (tmp_path / "run" / "export" / "config.json").is_file()
    # 2 samples of 4 per step at the least, had a step's window held a save's 1000 s: ~1000 times more
    assert [m["step"] for m in history] == list(range(1, steps + 1))
    assert min(m["samples_per_s"] for m in history) > 4 / 100, [m["samples_per_s"] for m in history]


def test_an_export_that_fails_before_writing_still_leaves_the_last_checkpoint(
        join: Callable[[], Distributed], dataset: Path, model_file: Path, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """train() leaves the last step's save to export(): gathering the weights for the
    export failing (memory) must not cost the run its last checkpoint."""
    import tacl_scale.trainer as trainer_module

    def no_memory(engine, keep=True):
        raise RuntimeError("out of memory gathering the fp32 masters")

    monkeypatch.setattr(trainer_module, "engine_master_weights", no_memory)
    trainer = Trainer.build(make_config(dataset, model_file, tmp_path / "run", steps=3), join())
    try:
        with pytest.raises(RuntimeError, match="out of memory"):
            trainer.train()
    finally:
        trainer.close()
    from tacl_scale.checkpoint import newest_verified_tag

    assert newest_verified_tag(tmp_path / "run" / "checkpoints") == ("step00000003", [])
    assert not (tmp_path / "run" / "export").exists()


def test_skipped_updates_do_not_count(join: Callable[[], Distributed], dataset: Path, model_file: Path,
                                      tmp_path: Path) -> None:
    """A non-finite loss on the second attempt makes DeepSpeed skip that update: it
    is logged, the step counter and the schedule stay put, and after --steps
    applied updates the lr is 0."""
    steps = 4
    trainer = Trainer.build(make_config(dataset, model_file, tmp_path / "run", steps=steps, export=False), join())
    attempts = 0
    original = trainer.parts.engine.module.forward

    def poisoned(batch, hidden=None):
        parts = original(batch, hidden)
        if attempts == 1:  # the second optimizer step's micro-batches
            parts["loss"] = parts["loss"] * float("inf")
        return parts

    trainer.parts.engine.module.forward = poisoned
    try:
        results = []
        while trainer.state.step < steps:
            results.append(trainer.train_step())
            attempts += 1
        assert [r.applied for r in results] == [True, False, True, True, True]
        assert trainer.state.skipped == 1 and trainer.engine.skipped_steps == 1
        applied_lrs = [r.metrics["lr"] for r in results if r.applied]
        assert applied_lrs == pytest.approx([1e-3 * trainer.config.optim.lr_factor(k) for k in range(steps)])
        assert results[1].metrics["lr"] == results[2].metrics["lr"]  # the retry uses the same lr
        assert trainer.parts.engine.scheduler.get_last_lr()[0] == 0.0
        assert [r.metrics["skipped_steps"] for r in results] == [0, 1, 1, 1, 1]
        assert "grad_norm" not in results[1].metrics
    finally:
        trainer.close()


def test_train_logs_skips_and_stops_a_diverged_run(join: Callable[[], Distributed], dataset: Path, model_file: Path,
                                                   tmp_path: Path) -> None:
    config = make_config(dataset, model_file, tmp_path / "run", steps=3, export=False,
                         optim=OptimConfig(steps=3, lr=1e-3, batch_size=4, micro_batch_size=2,
                                           max_skipped_in_a_row=3))
    trainer = Trainer.build(config, join())
    original = trainer.parts.engine.module.forward
    trainer.parts.engine.module.forward = lambda batch, hidden=None: {**original(batch, hidden),
                                                         "loss": original(batch, hidden)["loss"] * float("nan")}
    try:
        with pytest.raises(TrainError, match="3 updates in a row skipped"):
            trainer.train()
    finally:
        trainer.close()
    events = read_records(RunDir(tmp_path / "run").metrics_file)
    assert [e["event"] for e in events] == ["skipped_update", "skipped_update"] and not step_records(events)
    assert events[-1]["skipped_steps"] == 2 and events[-1]["after_step"] == 0


def test_only_the_rank_that_exports_keeps_a_host_copy_of_the_masters(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every rank gathers each master weight (a collective) at the end of a run, and
    every rank kept a host copy of the whole model (1.3 GB for BERT-large, 8 per
    node) that only rank 0 writes; the others now gather the same and keep nothing."""
    from types import SimpleNamespace

    import deepspeed.utils

    from tacl_scale.master_weights import engine_master_weights

    gathered: list[torch.nn.Parameter] = []
    monkeypatch.setattr(deepspeed.utils, "safe_get_full_fp32_param", lambda param: gathered.append(param))
    wrapper = torch.nn.Module()
    wrapper.student = torch.nn.Module()
    wrapper.student.a, wrapper.student.b = torch.nn.Linear(2, 2), torch.nn.Linear(2, 2)
    wrapper.student.b.weight = wrapper.student.a.weight  # tied, as the MLM decoder and the embeddings
    engine = SimpleNamespace(module=wrapper)
    kept = engine_master_weights(engine)
    assert sorted(kept) == ["a.bias", "a.weight", "b.bias", "b.weight"] and len(gathered) == 3
    assert engine_master_weights(engine, keep=False) == {} and len(gathered) == 6  # the same collectives


def test_bf16_run_exports_the_fp32_master_weights(join: Callable[[], Distributed], dataset: Path, model_file: Path,
                                                  tmp_path: Path) -> None:
    """With a bf16 config the module computes in bf16 while ZeRO keeps fp32
    masters; the export holds the masters (not bf16-rounded), at the end of
    training and from ``python -m tacl_scale.export``, even once the original
    --model file is gone."""
    from deepspeed.utils import safe_get_full_fp32_param
    from transformers import BertForPreTraining

    from tacl_scale.export import export_checkpoint

    model = tmp_path / "bert.json"
    model.write_text(model_file.read_text())
    trainer = Trainer.build(make_config(dataset, model, tmp_path / "run", steps=3, settings=BF16), join())
    try:
        assert next(trainer.engine.module.parameters()).dtype == torch.bfloat16
        trainer.train()
        masters = {name[len("student."):]: safe_get_full_fp32_param(param).detach().clone()
                   for name, param in trainer.engine.module.named_parameters()}
        halves = {name[len("student."):]: param.detach().float()
                  for name, param in trainer.engine.module.named_parameters()}
    finally:
        trainer.close()
    model.unlink()  # the run directory alone must be enough
    again = export_checkpoint(tmp_path / "run", tmp_path / "again")
    for out in (tmp_path / "run" / "export", again):
        exported = BertForPreTraining.from_pretrained(out).state_dict()
        for name, master in masters.items():
            assert exported[name].dtype == torch.float32
            assert torch.equal(exported[name], master), name
        weight = "bert.encoder.layer.0.attention.self.query.weight"
        assert not torch.equal(exported[weight], halves[weight])  # not the bf16 copy
        assert torch.equal(exported[weight].bfloat16().float(), halves[weight])  # whose rounding it is
    from transformers import BertTokenizerFast

    assert BertTokenizerFast.from_pretrained(again).convert_tokens_to_ids("[MASK]") == 103


def test_fused_optimizer_same_updates_and_state(join: Callable[[], Distributed], dataset: Path, model_file: Path,
                                                tmp_path: Path) -> None:
    """``--fused-optimizer`` (AdamW's fused kernel) gives the same updates as the
    default one (the losses of every step, and after the last update the moments and
    the fp32 master weights) and the same optimizer-state layout in the checkpoint."""
    losses, states, saved_states = {}, {}, {}
    for fused in (False, True):
        config = make_config(dataset, model_file, tmp_path / f"run{fused}", steps=3, export=False,
                             performance=PerformanceConfig(fused_optimizer=fused))
        trainer = Trainer.build(config, join())
        try:
            assert trainer.parts.engine.optimizer.defaults["fused"] is (True if fused else None)
            losses[fused] = [m["loss"] for m in trainer.train()]
        finally:
            trainer.close()
        optim_file = next((tmp_path / f"run{fused}" / "checkpoints" / "step00000003").glob("*optim_states.pt"))
        saved = torch.load(optim_file, map_location="cpu", weights_only=False)["optimizer_state_dict"]
        states[fused] = {group: {name: (tuple(t.shape), t.dtype) for name, t in state.items()}
                         for group, state in saved["base_optimizer_state"]["state"].items()}
        saved_states[fused] = saved
    assert losses[True] == pytest.approx(losses[False], rel=1e-5)
    for group, state in saved_states[False]["base_optimizer_state"]["state"].items():
        for name in ("exp_avg", "exp_avg_sq"):
            torch.testing.assert_close(saved_states[True]["base_optimizer_state"]["state"][group][name], state[name],
                                       rtol=1e-4, atol=1e-9)
    masters = [saved["single_partition_of_fp32_groups"] for saved in (saved_states[True], saved_states[False])]
    assert len(masters[0]) == len(masters[1]) == 2
    for fused_master, default_master in zip(*masters, strict=True):
        torch.testing.assert_close(fused_master, default_master, rtol=1e-5, atol=1e-7)
    assert states[True] == states[False] and len(states[True]) == 2
    assert all({"exp_avg", "exp_avg_sq", "step"} == set(group) for group in states[True].values())
    # A fused run's checkpoint resumes with the default optimizer, and goes on.
    config = make_config(dataset, model_file, tmp_path / "runTrue", steps=4, export=False,
                         checkpoint=CheckpointConfig(save_every=100, resume=True, allow_changes=True),
                         performance=PerformanceConfig(fused_optimizer=False))
    trainer = Trainer.build(config, join())
    try:
        assert trainer.state.step == 3
        assert [m["step"] for m in trainer.train()] == [4]
    finally:
        trainer.close()


def test_unpadded_training_matches_padded(join: Callable[[], Distributed], dataset: Path, model_file: Path,
                                          tmp_path: Path) -> None:
    """Packed micro-batches (forced on CPU) give the padded run's losses with
    dropout off."""
    bert = json.loads(model_file.read_text()) | {"hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0}
    model = tmp_path / "bert.json"
    model.write_text(json.dumps(bert))
    losses = {}
    for unpad in (False, True):
        config = make_config(dataset, model, tmp_path / f"run{unpad}", steps=3, export=False,
                             performance=PerformanceConfig(unpad=unpad))
        trainer = Trainer.build(config, join())
        try:
            assert trainer.parts.performance.unpad is unpad
            losses[unpad] = trainer.train()
        finally:
            trainer.close()
    for padded, packed in zip(losses[False], losses[True], strict=True):
        for key in ("loss", "tacl", "mlm", "nsp"):
            assert packed[key] == pytest.approx(padded[key], rel=1e-4, abs=1e-5), key
        assert packed["tokens_per_s"] > 0


def test_deepspeed_config_is_a_pure_function_of_the_config(tmp_path: Path) -> None:
    fp16 = {"zero_optimization": {"stage": 2}, "fp16": {"enabled": True}, "train_batch_size": 99}
    config = make_config(tmp_path, tmp_path, tmp_path, settings=fp16)
    before = json.dumps(config.engine.settings)
    cpu = deepspeed_config(config, 2, "cpu")
    assert cpu["fp16"]["enabled"] is False and cpu["train_batch_size"] == 4
    assert cpu["gradient_accumulation_steps"] == 1 and cpu["train_micro_batch_size_per_gpu"] == 2
    assert deepspeed_config(config, 1, "cuda")["fp16"]["enabled"] is True
    assert json.dumps(config.engine.settings) == before  # the typed config is never modified
    assert config.engine.precision == "fp16" and EngineConfig("x", BF16).precision == "bf16"
    with pytest.raises(TrainError, match=r"global batch 4 is not micro-batch 2 × 3 rank\(s\).*no micro-batch fits"):
        deepspeed_config(config, 3, "cpu")
    with pytest.raises(TrainError, match="scheduler"):
        deepspeed_config(replace(config, engine=EngineConfig("s.json", FP32 | {"scheduler": {}})), 1, "cpu")
    # ZeRO-3 was accepted: one CPU rank trained, two hung at the end of the run
    for stage in (3, "3"):
        with pytest.raises(TrainError, match=rf"z3.json: zero_optimization.stage {stage!r}: tacl-scale trains with "
                                             r"ZeRO stage 0, 1 or 2"):
            deepspeed_config(replace(config, engine=EngineConfig("z3.json", {"zero_optimization": {"stage": stage}})),
                             1, "cpu")
    offload = {"zero_optimization": {"stage": 2, "offload_optimizer": {"device": "cpu"}}}
    with pytest.raises(TrainError, match=r"off.json: zero_optimization.offload_optimizer: ZeRO-Offload is not "
                                         "supported"):
        deepspeed_config(replace(config, engine=EngineConfig("off.json", offload)), 1, "cpu")
    not_offloaded = {"zero_optimization": {"stage": 2, "offload_optimizer": {"device": "none"}}}
    deepspeed_config(replace(config, engine=EngineConfig("z.json", not_offloaded)), 1, "cpu")
    for stage in (0, 1, 2):
        deepspeed_config(replace(config, engine=EngineConfig("z.json", {"zero_optimization": {"stage": stage}})),
                         1, "cpu")


def test_engine_config_file_errors_name_the_file(tmp_path: Path) -> None:
    bad = tmp_path / "ds.json"
    bad.write_text("{not json")
    with pytest.raises(ConfigError, match="ds.json: unreadable"):
        EngineConfig.from_file(bad)
    bad.write_text("[1, 2]")
    with pytest.raises(ConfigError, match="JSON object"):
        EngineConfig.from_file(bad)
    with pytest.raises(ConfigError) as missing:
        EngineConfig.from_file(tmp_path / "missing.json")
    assert str(missing.value) == f"{tmp_path / 'missing.json'}: unreadable DeepSpeed config: No such file or directory"


@pytest.mark.parametrize(("settings", "said"), [
    ({"train_batch_size": "eight"}, "train_batch_size must be an integer or \"auto\", not 'eight'"),
    ({"train_micro_batch_size_per_gpu": 2.5}, "train_micro_batch_size_per_gpu must be an integer or \"auto\", not 2.5"),
    ({"gradient_clipping": True}, "gradient_clipping must be a number or \"auto\", not True"),
    ({"fp16": True}, "fp16 must be a JSON object, not True"),
    ({"bf16": {"enabled": "yes"}}, "bf16.enabled must be true, false or \"auto\", not 'yes'"),
    ({"optimizer": {"type": "AdamW", "params": [1e-3]}}, "optimizer.params must be a JSON object, not [0.001]"),
    ({"optimizer": {"params": {"lr": "1e-3"}}}, "optimizer.params.lr must be a number or \"auto\", not '1e-3'"),
    ({"optimizer": {"params": {"betas": [0.9]}}}, "optimizer.params.betas must be two numbers or \"auto\", not [0.9]"),
    ({"zero_optimization": 2}, "zero_optimization must be a JSON object, not 2"),
    # Each of these failed after the run directory was written: in the trainer (timers, data_types) or at the
    # first step (DeepSpeed reads them without a check).
    ({"timers": "off"}, "timers must be a JSON object, not 'off'"),
    ({"data_types": "fp32"}, "data_types must be a JSON object, not 'fp32'"),
    ({"steps_per_print": "auto"}, "steps_per_print must be a number >= 1, not 'auto': tacl-scale fills in \"auto\" "
     "only for the batch sizes, gradient_clipping, fp16/bf16.enabled and the optimizer's params"),
    ({"steps_per_print": 0}, "steps_per_print must be a number >= 1, not 0"),
    ({"wall_clock_breakdown": "auto"}, "wall_clock_breakdown must be true or false, not 'auto': tacl-scale fills in "
     "\"auto\" only for the batch sizes, gradient_clipping, fp16/bf16.enabled and the optimizer's params"),
    ({"gradient_predivide_factor": float("nan")}, "gradient_predivide_factor must be a finite number > 0, not nan"),
    # A number out of range was blamed on a flag the user had not given (--batch-size must be >= 1, got -8).
    ({"train_batch_size": -8}, "train_batch_size must be an integer >= 1 or \"auto\", not -8"),
    ({"train_micro_batch_size_per_gpu": 0}, "train_micro_batch_size_per_gpu must be an integer >= 1 or \"auto\", not 0"),
    ({"gradient_clipping": -1}, "gradient_clipping must be a number >= 0 or \"auto\", not -1"),
    ({"optimizer": {"params": {"lr": 0}}}, "optimizer.params.lr must be a finite number > 0 or \"auto\", not 0"),
    ({"optimizer": {"params": {"weight_decay": -0.1}}},
     "optimizer.params.weight_decay must be a finite number >= 0 or \"auto\", not -0.1"),
    ({"optimizer": {"params": {"betas": [0.9, 1.0]}}}, "optimizer.params.betas must be two numbers in [0, 1), not [0.9, 1.0]"),
])
def test_a_setting_of_the_wrong_type_is_one_error_naming_it(settings: dict, said: str, tmp_path: Path) -> None:
    """Each was a traceback from inside the trainer (TypeError, AttributeError)."""
    path = tmp_path / "ds.json"
    path.write_text(json.dumps({"zero_optimization": {"stage": 2}, **settings}))
    with pytest.raises(ConfigError) as refused:
        EngineConfig.from_file(path)
    assert str(refused.value) == f"{path}: {said}"


def test_the_shipped_configs_pass_the_type_check() -> None:
    for path in shipped_ds_configs():
        EngineConfig.from_file(path)


def test_a_config_as_the_hf_integration_writes_it_passes_the_type_check(tmp_path: Path) -> None:
    """As DeepSpeed's Hugging Face integration and the configs copied from it spell
    them: "auto" for what the trainer settles, "auto" buckets (DeepSpeed's own
    ZeRO section reads them), steps_per_print 1e5 (a float: DeepSpeed only takes
    step % it) or Infinity, wall_clock_breakdown false."""
    path = tmp_path / "ds.json"
    path.write_text(json.dumps({
        "fp16": {"enabled": "auto", "loss_scale": 0, "initial_scale_power": 16}, "bf16": {"enabled": "auto"},
        "optimizer": {"type": "AdamW", "params": {"lr": "auto", "betas": "auto", "eps": "auto", "weight_decay": "auto"}},
        "zero_optimization": {"stage": 2, "overlap_comm": True, "contiguous_gradients": True,
                              "reduce_bucket_size": "auto", "allgather_bucket_size": 2e8},
        "gradient_accumulation_steps": "auto", "gradient_clipping": "auto", "train_batch_size": "auto",
        "train_micro_batch_size_per_gpu": "auto", "steps_per_print": 1e5, "wall_clock_breakdown": False}))
    assert EngineConfig.from_file(path).settings["steps_per_print"] == 1e5
    path.write_text('{"zero_optimization": {"stage": 2}, "steps_per_print": Infinity}')
    assert EngineConfig.from_file(path).settings["steps_per_print"] == float("inf")


def test_performance_defaults_follow_the_device() -> None:
    assert PerformanceConfig().resolve("cuda") == (True, True, None, True)
    assert PerformanceConfig().resolve("cpu") == (False, False, None, False)
    assert PerformanceConfig().resolve("cuda", pad_to_max_length=True) == (False, True, None, True)
    assert PerformanceConfig(unpad=False, fused_optimizer=False, compile=False).resolve("cuda") == (
        False, False, None, False)
    assert PerformanceConfig(unpad=True, compile=True).resolve("cpu") == (True, False, None, True)
    # Packed fp32 on CUDA has no FlashAttention: the compiled encoder is not used there, said once.
    unpad, _, warning, compiled = PerformanceConfig().resolve("cuda", precision="fp32")
    assert unpad and not compiled and warning is not None and "--compile" in warning
    with pytest.raises(ConfigError, match="choose one"):
        PerformanceConfig(unpad=True).resolve("cpu", pad_to_max_length=True)


def test_a_compiled_fp32_teacher_on_cuda_trains_on_padded_batches() -> None:
    """FlashAttention takes fp16/bf16 only: a compiled fp32 teacher's packed attention
    was a dense mask over the micro-batch's tokens (about 4 GB of booleans at micro
    256, length 256, per layer), so such a run trains padded, compiled, said once."""
    for asked in (PerformanceConfig(), PerformanceConfig(unpad=True)):
        unpad, fused, warning, compiled = asked.resolve("cuda", teacher_dtype="fp32")
        assert (unpad, fused, compiled) == (False, True, True)
        assert warning is not None and "--teacher-dtype fp32" in warning and "padded batches" in warning
    for dtype in (None, "fp16", "bf16"):  # no teacher, or a half-precision one: packed
        assert PerformanceConfig().resolve("cuda", teacher_dtype=dtype) == (True, True, None, True)
    # Uncompiled, the teacher attends sequence by sequence (said by build_engine); the CPU has no FlashAttention.
    assert PerformanceConfig(compile=False).resolve("cuda", teacher_dtype="fp32") == (True, True, None, False)
    assert PerformanceConfig(unpad=True, compile=True).resolve("cpu", teacher_dtype="fp32") == (
        True, False, None, True)


@pytest.mark.parametrize(("objectives", "teacher_dtype", "packed"), [
    (("tacl", "mlm", "nsp"), "fp32", False), (("tacl", "mlm", "nsp"), None, True), (("mlm", "nsp"), "fp32", True)])
def test_the_run_resolves_its_layout_with_its_teachers_dtype(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, tmp_path: Path,
        objectives: tuple[str, ...], teacher_dtype: str | None, packed: bool) -> None:
    """What the run settles on an sm_90 GPU: the default teacher (fp16 on CUDA) packs,
    --teacher-dtype fp32 pads, and without the tacl objective there is no teacher."""
    from types import SimpleNamespace

    from tacl_scale import parts

    monkeypatch.setattr(parts, "varlen_unsupported", lambda device: None)  # an H100: FlashAttention-2 there
    config = make_config(tmp_path / "data", tmp_path / "model.json", tmp_path / "run")
    config = replace(config, objective=replace(config.objective, objectives=objectives),
                     performance=replace(config.performance, teacher_dtype=teacher_dtype))
    dist = SimpleNamespace(device=torch.device("cuda", 0), is_main=True)
    with caplog.at_level("WARNING", logger="tacl_scale.trainer"):
        resolved = parts.resolve_performance(config, dist, "bf16")
    assert (resolved.unpad, resolved.compile) == (packed, True)
    assert ("--teacher-dtype fp32" in caplog.text) == (not packed)


def test_without_flash_attention_cuda_falls_back_to_padded_batches(monkeypatch: pytest.MonkeyPatch) -> None:
    """A V100 (sm_70) or T4 (sm_75) has no FlashAttention-2: the default (and an
    explicit --unpad) train padded there, with one warning that says why."""
    from tacl_scale.attention import varlen_unsupported

    monkeypatch.setattr(torch.backends.cuda, "is_flash_attention_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "Tesla V100-SXM2-32GB")
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (7, 0))
    reason = varlen_unsupported(torch.device("cuda", 0))
    assert reason == "Tesla V100-SXM2-32GB is sm_70, below the sm_80 it needs"
    for asked in (PerformanceConfig(), PerformanceConfig(unpad=True)):
        unpad, fused, warning, _ = asked.resolve("cuda", varlen_unsupported=reason)
        assert (unpad, fused) == (False, True)
        assert warning is not None and reason in warning and "padded batches (SDPA)" in warning
    assert PerformanceConfig(unpad=False).resolve("cuda", varlen_unsupported=reason).warning is None
    for capability in ((8, 0), (9, 0)):
        monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None, c=capability: c)
        assert varlen_unsupported(torch.device("cuda", 0)) is None
    monkeypatch.setattr(torch.backends.cuda, "is_flash_attention_available", lambda: False)
    assert "built without it" in varlen_unsupported(torch.device("cuda", 0))


def test_launch_environment_is_checked() -> None:
    assert LaunchEnv.from_environ({"RANK": "3", "LOCAL_RANK": "1", "WORLD_SIZE": "8"}) == LaunchEnv(3, 1, 8)
    # No launcher (tacl-train in a shell): one process here, its port picked when it joins.
    assert LaunchEnv.from_environ({}) == LaunchEnv(0, 0, 1, "127.0.0.1", "", standalone=True)
    assert not LaunchEnv.from_environ({"WORLD_SIZE": "1"}).standalone
    with pytest.raises(DistributedError, match="outside world size"):
        LaunchEnv.from_environ({"RANK": "2", "WORLD_SIZE": "2"})
    with pytest.raises(DistributedError, match="integers"):
        LaunchEnv.from_environ({"RANK": "x"})


@pytest.mark.parametrize(("visible", "local_rank", "device"), [(8, 3, 3), (1, 0, 0), (1, 3, None), (2, 3, None)])
def test_a_task_takes_the_gpu_of_its_local_rank_or_is_refused_saying_how_to_launch(
        monkeypatch: pytest.MonkeyPatch, visible: int, local_rank: int, device: int | None) -> None:
    """A task that sees fewer GPUs than its LOCAL_RANK (several tasks to one GPU, or
    Slurm's --gpus-per-task binding each task to its own: not told apart here) is
    refused in one line saying how to launch, before anything is placed."""
    import deepspeed.accelerator
    import torch.distributed

    placed: list[int] = []
    monkeypatch.setattr(deepspeed.accelerator, "get_accelerator", lambda: type("A", (), {"device_name": lambda self: "cuda"})())
    monkeypatch.setattr(torch.cuda, "device_count", lambda: visible)
    monkeypatch.setattr(torch.cuda, "set_device", placed.append)
    monkeypatch.setattr(Distributed, "_join", staticmethod(lambda env, backend: env))
    monkeypatch.setattr(torch.distributed, "get_rank", lambda: 11)
    monkeypatch.setattr(torch.distributed, "get_world_size", lambda: 16)
    env = LaunchEnv(11, local_rank, 16, "127.0.0.1", "29500")
    if device is None:
        with pytest.raises(DistributedError, match=f"LOCAL_RANK {local_rank}, but this task sees {visible} GPU.*"
                                                   "--gpus-per-node, not --gpus-per-task"):
            Distributed.setup(env)
        assert placed == []
        return
    rank = Distributed.setup(env)
    assert placed == [device] and rank.device == torch.device("cuda", device)


def _rank_whose_main_fails(rank: int, port: int, out: str) -> None:
    import datetime
    import time

    import torch.distributed as dist

    from tacl_scale.distributed import DistributedError

    def work() -> None:
        time.sleep(1)
        raise OSError(28, "No space left on device")

    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2,
                            timeout=datetime.timedelta(seconds=30))
    try:
        ranks = Distributed(rank, rank, 2, torch.device("cpu"))
        ranks.wait_poll_s = 0.2
        started = time.monotonic()
        try:
            ranks.wait_for_main(work)
        except (OSError, DistributedError) as err:
            Path(f"{out}.{rank}").write_text(f"{type(err).__name__}: {err}")
            Path(f"{out}.{rank}.seconds").write_text(str(time.monotonic() - started))
    finally:
        dist.destroy_process_group()


def test_a_failure_of_rank_0s_work_stops_every_rank_at_once(tmp_path: Path) -> None:
    """The other ranks waited in a broadcast rank 0 never reached when its work raised
    something other than what it caught (up to the process group's timeout)."""
    import torch.multiprocessing as mp
    from conftest import free_port

    out = tmp_path / "error"
    mp.start_processes(_rank_whose_main_fails, args=(free_port(), str(out)), nprocs=2, start_method="spawn")
    assert float(Path(f"{out}.1.seconds").read_text()) < 15  # rank 0's second of work, not the 30 s timeout
    assert Path(f"{out}.0").read_text() == "OSError: [Errno 28] No space left on device"
    assert Path(f"{out}.1").read_text() == ("DistributedError: rank 0 failed while this rank waited for it (OSError: "
                                             "[Errno 28] No space left on device); its own error line says more")


def _rank_interrupted_while_waited_for(rank: int, port: int, out: str) -> None:
    import datetime
    import signal
    import time

    import torch.distributed as dist

    signal.signal(signal.SIGINT, signal.default_int_handler)  # a background job's children ignore it

    def work() -> None:
        Path(f"{out}.started").write_text("1")
        time.sleep(60)

    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2,
                            timeout=datetime.timedelta(seconds=90))
    ranks = Distributed(rank, rank, 2, torch.device("cpu"))
    ranks.wait_poll_s = 0.2
    try:
        ranks.wait_for_main(work)
    except KeyboardInterrupt:
        Path(f"{out}.{rank}").write_text("interrupted")


def test_ctrl_c_stops_rank_0_while_its_work_runs(tmp_path: Path) -> None:
    """Rank 0's work ran in a thread pool whose shutdown waited for it: Ctrl-C during a
    conversion or the checksums came out only when they had ended."""
    import signal

    import torch.multiprocessing as mp
    from conftest import free_port

    out = tmp_path / "rank"
    ranks = mp.start_processes(_rank_interrupted_while_waited_for, args=(free_port(), str(out)), nprocs=2,
                               start_method="spawn", join=False)
    try:
        deadline = time_module.monotonic() + 60
        while not Path(f"{out}.started").exists() and time_module.monotonic() < deadline:
            time_module.sleep(0.1)
        interrupted = time_module.monotonic()
        os.kill(ranks.pids()[0], signal.SIGINT)
        ranks.processes[0].join(20)
        assert not ranks.processes[0].is_alive() and time_module.monotonic() - interrupted < 20
        assert Path(f"{out}.0").read_text() == "interrupted"
    finally:
        for process in ranks.processes:
            process.kill()
            process.join()


def test_one_owner_places_batches_and_reduces_on_its_device(join: Callable[[], Distributed]) -> None:
    one_rank = join()
    batch = one_rank.move({"ids": torch.ones(2, dtype=torch.long), "max_seqlen": 5})
    assert batch["ids"].device == one_rank.device and batch["max_seqlen"] == 5
    assert one_rank.sum(torch.tensor([1.0, 2.0])).tolist() == [1.0, 2.0]
    assert one_rank.any(True) and not one_rank.any(False)


def _rank_resuming_slowly(rank: int, port: int, run: str, out: str) -> None:
    """One of two gloo ranks whose collectives time out after 2 s, resuming a run whose
    checkpoint rank 0 converts in 4 s (a large model's universal conversion can take
    longer than DeepSpeed's default timeout of 10 minutes)."""
    import datetime
    import time

    import torch.distributed as dist

    from tacl_scale import checkpoint
    from tacl_scale.resume import checkpoint_to_resume

    def slow_copy(root: Path, tag: str, log_file: Path) -> str:
        time.sleep(4)
        return tag + checkpoint.UNIVERSAL

    checkpoint.newest_verified_tag = lambda root: ("step4", [])
    checkpoint.saved_world_size = lambda directory: 1  # saved by one rank: converted for two
    checkpoint.universal_copy = slow_copy
    # Joining waits as long as a spawned rank takes to import this module; then the
    # collectives get the short timeout (torch's own setter: private, test-only).
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2,
                            timeout=datetime.timedelta(seconds=120))
    dist.distributed_c10d._set_pg_timeout(datetime.timedelta(seconds=2))
    try:
        ranks = Distributed(rank, rank, 2, torch.device("cpu"))
        ranks.wait_poll_s = 0.5
        Path(f"{out}.{rank}").write_text(str(checkpoint_to_resume(RunDir(run), ranks)))
    finally:
        dist.destroy_process_group()


def test_ranks_wait_for_rank_0s_conversion_longer_than_the_collective_timeout(tmp_path: Path) -> None:
    """The other ranks waited for rank 0's checksums and universal conversion in one
    broadcast, which NCCL aborts at the process group's timeout: they now meet in a
    short collective every few seconds until it is done, and all get its tag."""
    import torch.multiprocessing as mp
    from conftest import free_port

    out = tmp_path / "tag"
    mp.start_processes(_rank_resuming_slowly, args=(free_port(), str(tmp_path / "run"), str(out)), nprocs=2,
                       start_method="spawn")
    assert [Path(f"{out}.{rank}").read_text() for rank in (0, 1)] == ["step4.universal"] * 2


def test_resume_without_a_checkpoint_says_it_starts_at_step_0(join: Callable[[], Distributed], dataset: Path,
                                                              model_file: Path, tmp_path: Path,
                                                              caplog: pytest.LogCaptureFixture) -> None:
    """The Slurm jobs always pass --resume: a first job (or one requeued before the
    first save) started from step 0 without a word."""
    config = make_config(dataset, model_file, tmp_path / "run", steps=2, export=False,
                         checkpoint=CheckpointConfig(save_every=100, resume=True, stop_after_steps=1))
    with caplog.at_level(logging.INFO, logger="tacl_scale"):
        run_job(config, join)
    assert f"--resume: no checkpoint in {tmp_path / 'run'} yet: starting the run from step 0" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="tacl_scale"):
        run_job(config, join)
    assert "no checkpoint in" not in caplog.text and "resumed from " in caplog.text


def test_bad_inputs_are_train_errors(join: Callable[[], Distributed], dataset: Path, tmp_path: Path) -> None:
    one_rank = join()
    with pytest.raises(TrainError, match=r"missing: not found \(--model\)$"):
        Trainer.build(make_config(dataset, tmp_path / "missing", tmp_path / "run"), one_rank)
    with pytest.raises(TrainError, match=r"nowhere: not found \(--data\)$"):
        Trainer.build(make_config(tmp_path / "nowhere", tmp_path / "missing", tmp_path / "run2"), one_rank)
    with pytest.raises(TrainError, match="manifest.json: not a BertConfig JSON: none of its keys"):
        Trainer.build(make_config(dataset, dataset / "manifest.json", tmp_path / "run3"), one_rank)
    assert not list(tmp_path.glob("run*"))
    assert ObjectiveConfig().objectives == ("tacl", "mlm", "nsp")


def test_resume_skips_a_checkpoint_whose_files_do_not_verify(join: Callable[[], Distributed], dataset: Path,
                                                             model_file: Path, tmp_path: Path,
                                                             caplog: pytest.LogCaptureFixture) -> None:
    """Every checkpoint records its files' sizes and checksums; a truncated or
    bit-flipped file is named and the newest checkpoint that verifies is used."""
    import shutil

    from tacl_scale.checkpoint import CHECKPOINT_RECORD, record_problem

    run = tmp_path / "run"
    config = make_config(dataset, model_file, run, steps=4, export=False,
                         checkpoint=CheckpointConfig(save_every=2, keep_last=3))
    run_job(config, join)
    root = run / "checkpoints"
    for tag in ("step00000002", "step00000004"):
        record = json.loads((root / tag / CHECKPOINT_RECORD).read_text())
        assert any(name.endswith("optim_states.pt") for name in record) and record_problem(root / tag) is None
    optim = next((root / "step00000004").glob("*optim_states.pt"))
    pristine = tmp_path / "pristine"
    shutil.copytree(run, pristine)

    def corrupt_and_resume(damage) -> Trainer:
        shutil.rmtree(run)
        shutil.copytree(pristine, run)
        damage(optim)
        resumed = Trainer.build(replace(config, checkpoint=CheckpointConfig(save_every=2, resume=True)), join())
        resumed.close()
        return resumed

    def truncate(path: Path) -> None:
        data = path.read_bytes()
        path.write_bytes(data[: len(data) // 2])

    def flip_a_bit(path: Path) -> None:
        data = bytearray(path.read_bytes())
        data[len(data) // 3] ^= 0x10
        path.write_bytes(bytes(data))

    for damage, words in ((truncate, "truncated"), (flip_a_bit, "checksum mismatch")):
        caplog.clear()
        with caplog.at_level("WARNING"):
            resumed = corrupt_and_resume(damage)
        assert resumed.state.step == 2, damage.__name__
        assert optim.name in caplog.text and words in caplog.text
        assert "resuming from the older checkpoint" in caplog.text
    # nothing verifies: a refusal naming the newest checkpoint's problem
    truncate(next((root / "step00000002").glob("*optim_states.pt")))
    with pytest.raises(TrainError, match="no checkpoint .* verifies.*step00000004"):
        Trainer.build(replace(config, checkpoint=CheckpointConfig(resume=True)), join())


def test_evaluation_reads_the_validation_split_only(join: Callable[[], Distributed], model_file: Path,
                                                    tmp_path: Path) -> None:
    """With a validation split the held-out batches are its instances, spread over
    it, never training instances, also when blending with upsampling weights."""
    from tacl_scale.data import PretrainDataset

    with_split = build_dataset(tmp_path / "ds", "--input", str(ZH_TEXT), "--format", "text", "--language", "zh",
                               "--tokenizer", str(ZH_VOCAB), "--min-doc-chars", "10", "--dupe-factor", "1",
                               "--max-seq-len", "64", "--validation-fraction", "0.3")
    train, held = PretrainDataset(with_split), PretrainDataset(with_split, split="validation")
    copy = shutil.copytree(with_split, tmp_path / "copy")  # a second dataset of the same instances
    config = make_config(with_split, model_file, tmp_path / "run", export=False, eval_every=2, eval_instances=6,
                         data=DataConfig((str(with_split), str(copy)), weights=(1.0, 3.0), num_workers=0))
    trainer = Trainer.build(config, join())
    try:
        assert trainer.parts.eval_every == 2
        rows = [row[mask.bool()] for batch in trainer.parts.eval_batches
                for row, mask in zip(batch["original_ids"], batch["attention_mask"], strict=True)]
        assert len(rows) == 6
        held_rows = {held[i]["original_ids"].tobytes() for i in range(len(held))}
        train_rows = {train[i]["original_ids"].tobytes() for i in range(len(train))}
        assert all(r.numpy().tobytes() in held_rows for r in rows)
        assert not any(r.numpy().tobytes() in train_rows for r in rows)
        assert trainer.train_step().applied
    finally:
        trainer.close()


@pytest.fixture(scope="module")
def sentence_list_dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Mirror-BERT's input: a list of strings, one a line, as single-segment instances."""
    root = tmp_path_factory.mktemp("sentences")
    return build_dataset(root / "ds", "--input", str(ZH_TEXT), "--format", "lines", "--language", "zh",
                         "--tokenizer", str(ZH_VOCAB), "--single-segment", "--max-seq-len", "64",
                         "--validation-fraction", "0.1")


def test_mirror_alone_on_a_sentence_list(join: Callable[[], Distributed], sentence_list_dataset: Path,
                                         model_file: Path, tmp_path: Path) -> None:
    """Mirror-BERT: no teacher, no masked-input pass; the loss, its accuracy and the
    held-out evaluation carry the mirror objective."""
    from tacl_scale.data import PretrainDataset

    data = PretrainDataset(sentence_list_dataset)
    assert data.manifest.instance_kind == "single-segment" and not data.manifest.static_masks
    item = data[0]
    assert len(item["masked_positions"]) == 0 and int(item["token_type_ids"].max()) == 0
    config = make_config(sentence_list_dataset, model_file, tmp_path / "run", steps=3, export=False,
                         objective=ObjectiveConfig(("mirror",)), eval_every=3, eval_instances=8,
                         optim=OptimConfig(steps=3, lr=1e-3, batch_size=8, micro_batch_size=4, schedule="constant"))
    trainer = Trainer.build(config, join())
    try:
        assert trainer.parts.teacher is None
        assert trainer.parts.eval_batches and trainer.parts.eval_batches[0]["mirror_ids"].shape[:2] == (2, 4)
        history = trainer.train()
        assert [sorted(k for k in h if k in ("mirror", "mirror_acc", "mlm", "nsp", "tacl")) for h in history] == [
            ["mirror", "mirror_acc"]] * 3
        assert all(h["loss"] == pytest.approx(h["mirror"]) and 0 <= h["mirror_acc"] <= 1 for h in history)
        assert [h["lr"] for h in history] == pytest.approx([1e-3] * 3)  # constant after the warm-up step
        scalars = evaluate_scalars(trainer)
        assert "mirror" in scalars and "mirror_acc" in scalars
    finally:
        trainer.close()


def evaluate_scalars(trainer: Trainer) -> dict[str, float]:
    from tacl_scale.evaluation import evaluate

    return evaluate(trainer.engine.module.student, trainer.parts.teacher, trainer.parts.eval_batches, trainer.config.objective)


@pytest.mark.parametrize(
    ("objectives", "dynamic", "message"),
    [(("mlm", "nsp", "mirror"), False, "no sentence pairs for nsp"),
     (("mlm", "mirror"), False, "without static masks, which mlm needs: add --dynamic-masking"),
     (("tacl",), False, "without static masks, which tacl needs")],
)
def test_objectives_a_dataset_cannot_feed_are_refused(join: Callable[[], Distributed], sentence_list_dataset: Path,
                                                      model_file: Path, tmp_path: Path, objectives: tuple[str, ...],
                                                      dynamic: bool, message: str) -> None:
    config = make_config(sentence_list_dataset, model_file, tmp_path / "run", objective=ObjectiveConfig(objectives),
                         data=DataConfig((str(sentence_list_dataset),), num_workers=0, dynamic_masking=dynamic))
    with pytest.raises(TrainError, match=message):
        Trainer.build(config, join())


def test_model_1_trains_mlm_nsp_and_mirror_together(join: Callable[[], Distributed], dataset: Path,
                                                    model_file: Path, tmp_path: Path,
                                                    caplog: pytest.LogCaptureFixture) -> None:
    """The paper's model-1 on pair instances: the views are each instance's unmasked
    sequence (view 2 span-masked), and the loss is the sum of the three."""
    config = make_config(dataset, model_file, tmp_path / "run", steps=2, export=False,
                         objective=ObjectiveConfig(("mlm", "nsp", "mirror")))
    with caplog.at_level("WARNING", logger="tacl_scale.trainer"):
        trainer = Trainer.build(config, join())
    try:
        # Batch 4 as 2 accumulation steps of 2: the negatives are not the whole batch, and it says so.
        assert "negatives come from 2 sequences at a time, not the global batch of 4" in caplog.text
        assert trainer.parts.teacher is None
        batch = next(trainer.parts.batches)
        assert torch.equal(batch["mirror_ids"][0], batch["original_ids"])
        assert int((batch["mirror_ids"][1] != batch["original_ids"]).sum()) > 0  # spans masked in view 2
        result = trainer.train_step()
        assert result.metrics["loss"] == pytest.approx(
            result.metrics["mlm"] + result.metrics["nsp"] + result.metrics["mirror"], rel=1e-5)
    finally:
        trainer.close()


def test_close_releases_the_engine(join: Callable[[], Distributed], dataset: Path, model_file: Path,
                                   tmp_path: Path) -> None:
    """ZeRO-2's gradient hooks hold the engine: without ``engine.destroy()`` every
    Trainer of a process (a benchmark sweep, a test module) stays in memory."""
    import gc
    import weakref

    trainer = Trainer.build(make_config(dataset, model_file, tmp_path / "run", export=False), join())
    try:
        trainer.train_step()
    finally:
        trainer.close()
    engine, student = weakref.ref(trainer.engine), weakref.ref(trainer.parts.student)
    del trainer
    gc.collect()
    assert engine() is None and student() is None


def test_the_documented_bf16_config_accumulates_gradients_in_fp32(join: Callable[[], Distributed], dataset: Path,
                                                                  model_file: Path, tmp_path: Path) -> None:
    """DeepSpeed accumulates in the model's dtype unless told otherwise: 8
    micro-batches of bf16 gradients would each be rounded to 8 bits of mantissa."""
    from conftest import ROOT

    engine = EngineConfig.from_file(ROOT / "ds_configs" / "zero2_bf16.json")
    assert engine.settings["data_types"]["grad_accum_dtype"] == "fp32"
    trainer = Trainer.build(make_config(dataset, model_file, tmp_path / "run", export=False, engine=engine), join())
    try:
        assert trainer.engine.get_data_types() == (torch.bfloat16, torch.float32)
        assert trainer.engine.optimizer.gradient_accumulation_dtype == torch.float32
        assert trainer.train_step().applied
    finally:
        trainer.close()


def test_the_zero1_config_trains_resumes_and_exports(join: Callable[[], Distributed], dataset: Path,
                                                    model_file: Path, tmp_path: Path) -> None:
    """ZeRO-1 with bf16 and fp32 gradient accumulation is DeepSpeed's BF16_Optimizer,
    another optimizer wrapper than ZeRO-2's: the trainer's checkpoint, resume and
    export work with it as well."""
    from conftest import ROOT
    from deepspeed.utils import safe_get_full_fp32_param
    from transformers import BertForPreTraining

    engine = EngineConfig.from_file(ROOT / "ds_configs" / "zero1_bf16.json")
    losses: dict[str, list[float]] = {}
    masters: dict[str, dict[str, torch.Tensor]] = {}
    for name, stop, resume in (("straight", None, False), ("resumed", 2, False), ("resumed", None, True)):
        config = make_config(dataset, model_file, tmp_path / name, steps=4, engine=engine,
                             checkpoint=CheckpointConfig(save_every=100, resume=resume, stop_after_steps=stop))
        trainer = Trainer.build(config, join())
        try:
            assert trainer.engine.zero_optimization_stage() == 1
            assert trainer.engine.get_data_types() == (torch.bfloat16, torch.float32)
            losses.setdefault(name, []).extend(m["loss"] for m in trainer.train())
            masters[name] = {n[len("student."):]: safe_get_full_fp32_param(p).detach().clone()
                             for n, p in trainer.engine.module.named_parameters()}
        finally:
            trainer.close()
    assert len(losses["straight"]) == 4 and losses["resumed"] == losses["straight"]
    for name, master in masters["straight"].items():
        assert torch.equal(masters["resumed"][name], master), name
    exported = BertForPreTraining.from_pretrained(tmp_path / "straight" / "export").state_dict()
    for name, master in masters["straight"].items():
        assert exported[name].dtype == torch.float32 and torch.equal(exported[name], master), name


def test_cuda_graphs_leave_no_gradient_past_the_backward_that_made_it(join: Callable[[], Distributed],
                                                                      dataset: Path, model_file: Path,
                                                                      tmp_path: Path) -> None:
    """A replayed CUDA graph reuses its memory from the next micro-batch on, so with
    --cuda-graphs every gradient is consumed by the backward that made it. ZeRO-1 in
    bf16 is DeepSpeed's BF16_Optimizer, which otherwise keeps each in param.grad until
    the next backward zeroes it (the graphs would have overwritten it by then):
    --cuda-graphs turns on its immediate_grad_update. Same losses either way (the
    graphs themselves run on CUDA only: here the engine's side of it)."""
    from conftest import ROOT

    from tacl_scale.model import teacher_states

    engine = EngineConfig.from_file(ROOT / "ds_configs" / "zero1_bf16.json")
    losses, kept = {}, {}
    for graphs in (False, True):
        config = make_config(dataset, model_file, tmp_path / str(graphs), steps=3, engine=engine, export=False,
                             performance=PerformanceConfig(cuda_graphs=graphs))
        assert deepspeed_config(config, 1, "cuda", precision="bf16")["bf16"].get("immediate_grad_update") is (
            True if graphs else None)
        trainer = Trainer.build(config, join())
        try:
            assert trainer.engine.get_data_types() == (torch.bfloat16, torch.float32)
            losses[graphs] = [m["loss"] for m in trainer.train()]
            batch = trainer.dist.move(next(trainer.parts.batches))  # the first micro-batch of a step
            trainer.engine.backward(trainer.engine(batch, teacher_states(trainer.parts.teacher, batch))["loss"])
            kept[graphs] = [name for name, p in trainer.engine.module.named_parameters() if p.grad is not None]
        finally:
            trainer.close()
    assert kept[False] and not kept[True], kept[True][:3]
    assert len(losses[True]) == 3 and losses[True] == losses[False]
    # fp16: no BF16_Optimizer, nothing to turn on (fp32 accumulating in fp32 is refused below)
    assert "immediate_grad_update" not in deepspeed_config(config, 1, "cuda", precision="fp16").get("bf16", {})
    refused = EngineConfig("mine.json", {**engine.settings, "bf16": {"enabled": True, "immediate_grad_update": False}})
    with pytest.raises(TrainError, match=r"mine\.json: bf16\.immediate_grad_update false .* --cuda-graphs"):
        deepspeed_config(replace(config, engine=refused), 1, "cuda", precision="bf16")
    # Configs that keep the gradients in param.grad until the optimizer step: refused with --cuda-graphs.
    for settings, precision in (({"zero_optimization": {"stage": 0}}, "fp16"),
                                ({"zero_optimization": {"stage": 0}}, "fp32"),
                                ({"zero_optimization": {"stage": 1}}, "fp16"),
                                ({"zero_optimization": {"stage": 1}, "data_types": {"grad_accum_dtype": "fp16"}},
                                 "fp16"),
                                ({"zero_optimization": {"stage": 1}, "data_types": {"grad_accum_dtype": "fp32"}},
                                 "fp32"),
                                ({"zero_optimization": {"stage": 1}, "data_types": {"grad_accum_dtype": "float16"}},
                                 "fp16"),
                                ({"zero_optimization": {"stage": 0}, "data_types": {"grad_accum_dtype": "half"}},
                                 "fp16")):
        keeps = replace(config, engine=EngineConfig("keeps.json", settings))
        with pytest.raises(TrainError, match=rf"keeps\.json: zero_optimization\.stage \d with {precision} gradient "
                                             r"accumulation keeps each gradient in param\.grad .* --cuda-graphs"):
            deepspeed_config(keeps, 1, "cuda", precision=precision)
        assert deepspeed_config(replace(keeps, performance=PerformanceConfig()), 1, "cuda", precision=precision)
    for settings, precision in (({"zero_optimization": {"stage": 1}, "data_types": {"grad_accum_dtype": "fp32"}},
                                 "fp16"),
                                ({"zero_optimization": {"stage": 1}, "data_types": {"grad_accum_dtype": "float32"}},
                                 "fp16"), ({"zero_optimization": {"stage": 2}}, "fp16"),
                                ({"zero_optimization": {"stage": 2}}, "fp32")):
        assert deepspeed_config(replace(config, engine=EngineConfig("fine.json", settings)), 1, "cuda",
                                precision=precision)


def test_the_command_line_takes_its_defaults_from_the_config_dataclasses(tmp_path: Path) -> None:
    """With nothing given (a DeepSpeed JSON without batch sizes, clipping or an
    optimizer section) every setting is its dataclass's default: no fallback
    literal in train.py can drift from them."""
    from tacl_scale.train import parse_args

    ds = tmp_path / "ds.json"
    ds.write_text(json.dumps(FP32))
    config = parse_args(["--ds", str(ds), "--data", "d", "--model", "m", "--output", str(tmp_path / "run")])
    assert config.optim == OptimConfig()
    assert config.objective == ObjectiveConfig()
    assert config.checkpoint == CheckpointConfig()
    assert config.performance == PerformanceConfig()
    # --data and --model are made absolute where parsed, as --output: run.json records them
    assert config.data == DataConfig((os.path.abspath("d"),))
    defaults = TrainConfig(os.path.abspath("m"), str(tmp_path / "run"), EngineConfig(str(ds), FP32),
                           DataConfig((os.path.abspath("d"),)))
    assert config == defaults


@pytest.mark.parametrize(("flags", "message"), [
    (["--lr=-1e-3"], "--lr must be a finite number > 0"), (["--save-every", "0"], "--save-every must be >= 1"),
    # NaN fails every comparison, so "must be > 0" checks written as "<= 0 refuses" passed it (a NaN loss at step 1)
    (["--lr", "inf"], "--lr must be a finite number > 0, got inf"),
    (["--temperature", "nan"], "--temperature must be a finite number > 0, got nan"),
    (["--mirror-temperature", "nan"], "--mirror-temperature must be a finite number > 0, got nan"),
    (["--weight-decay", "nan"], "--weight-decay must be a finite number >= 0"),
    (["--grad-clip", "inf"], "--grad-clip must be a finite number >= 0"),
    (["--data", "e", "--data-weights", "1", "inf"], r"--data-weights must be one finite positive weight per --data, "
                                                    r"got \[1.0, inf\]"),
    (["--steps", "-5"], "--steps must be >= 1"), (["--warmup-ratio", "-1"], r"--warmup-ratio must be in \[0, 1\]"),
    (["--micro-batch-size", "0"], "--micro-batch-size must be >= 1"), (["--keep-last", "-1"], r"--keep-last must be >= 0 \(0: keep all\), got -1"),
    (["--eval-instances", "0"], "--eval-instances must be >= 1, got 0"),
    (["--num-workers", "-1"], "--num-workers must be >= 0, got -1"),
    (["--seed", "-1"], r"--seed must be in \[0, 2\*\*63\), got -1"),
    (["--seed", str(2**63)], rf"--seed must be in \[0, 2\*\*63\), got {2**63}"),
    (["--data", "./d"], rf"--data {re.escape(os.path.abspath('d'))} is given twice: give each dataset once "
                        r"\(--data-weights"),
])
def test_every_numeric_option_is_checked_when_parsed(tmp_path: Path, flags: list[str], message: str) -> None:
    """A bad number is a one-line refusal before anything runs (train.py prints the
    ConfigError as ``error: ...`` and exits 2), never a traceback after the model
    is built or a run that trains nothing."""
    from tacl_scale.train import parse_args

    ds = tmp_path / "ds.json"
    ds.write_text(json.dumps(FP32))
    base = ["--ds", str(ds), "--data", "d", "--model", "m", "--output", str(tmp_path / "run")]
    with pytest.raises((ConfigError, UsageError), match=message):  # a dataclass's ValueError is a UsageError
        parse_args(base + flags)


def test_refusals_of_the_job_shape_come_before_anything_is_written(join: Callable[[], Distributed], dataset: Path,
                                                                   model_file: Path, tmp_path: Path) -> None:
    run = tmp_path / "run"
    odd = replace(make_config(dataset, model_file, run), optim=OptimConfig(steps=4, batch_size=5, micro_batch_size=2))
    with pytest.raises(TrainError, match="global batch 5 is not micro-batch 2 .* one of 1, 5"):
        Trainer.build(odd, join())
    assert not run.exists()
    a_file = tmp_path / "a-file"
    a_file.write_text("x")
    with pytest.raises(TrainError, match=f"{a_file}: is a file, not a run directory"):
        Trainer.build(make_config(dataset, model_file, a_file), join())


@pytest.mark.parametrize("name", ["zero2.json", "zero2_bf16.json", "zero1_bf16.json", "cpu.json"])
def test_every_setting_of_the_shipped_deepspeed_configs_is_one_deepspeed_reads(name: str, tmp_path: Path) -> None:
    """No false alarm from the check below, on this DeepSpeed (the GPU-image tier runs
    it on the image's)."""
    from tacl_scale.engine_config import settings_deepspeed_ignores

    config = make_config(tmp_path / "d", tmp_path / "m", tmp_path / "run",
                         engine=EngineConfig.from_file(ROOT / "ds_configs" / name))
    for device, precision in (("cpu", "fp32"), ("cuda", "bf16"), ("cuda", "fp16")):
        ds = deepspeed_config(config, 1, device, precision=precision)
        assert settings_deepspeed_ignores(ds, name) == [], (device, precision)


def test_settings_that_change_nothing_are_said_before_anything_runs(
        join: Callable[[], Distributed], tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """DeepSpeed ignores a top-level key it does not know without a word (a
    misspelt ``train_batch_sise`` trained with another batch than the user wrote),
    and the trainer ignored a setting of an objective the run does not train."""
    settings = {**FP32, "train_batch_sise": 256, "tensorboard": {"enabled": False}}
    config = make_config(tmp_path / "no-data", tmp_path / "no-model", tmp_path / "run", settings=settings,
                         objective=ObjectiveConfig(("mlm", "nsp"), temperature=0.05))
    with caplog.at_level(logging.WARNING, logger="tacl_scale"), pytest.raises(TrainError, match="not found"):
        Trainer.build(config, join())  # refused for the missing --data right after the checks
    assert [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING] == [
        "inline.json: 'train_batch_sise' is no setting of DeepSpeed's, which ignores it; did you mean "
        "train_batch_size?",
        "--temperature 0.05 has no effect: --objectives mlm,nsp has no tacl"]


@pytest.mark.parametrize(("flags", "said"), [
    (["--objectives", "mlm,nsp", "--temperature", "0.05", "--tacl-impl", "torch", "--teacher-dtype", "fp16"],
     ["--temperature 0.05 has no effect: --objectives mlm,nsp has no tacl",
      "--tacl-impl torch has no effect: --objectives mlm,nsp has no tacl",
      "--teacher-dtype fp16 has no effect: --objectives mlm,nsp has no tacl (its teacher is the only one)"]),
    (["--mirror-temperature", "0.05", "--mirror-pooling", "mean", "--mirror-span", "0"],
     ["--mirror-temperature 0.05 has no effect: --objectives tacl,mlm,nsp has no mirror",
      "--mirror-pooling mean has no effect: --objectives tacl,mlm,nsp has no mirror",
      "--mirror-span 0 has no effect: --objectives tacl,mlm,nsp has no mirror"]),
    (["--objectives", "nsp,mirror", "--dynamic-masking"],
     ["--dynamic-masking has no effect: --objectives nsp,mirror has no mlm or tacl (the objectives that read the "
      "masks)"]),
    # each used, or left at its default
    (["--objectives", "mirror", "--mirror-span", "0", "--mirror-temperature", "0.05"], []),
    (["--temperature", "0.05", "--teacher-dtype", "fp32", "--dynamic-masking"], []),
    (["--objectives", "mlm,nsp", "--temperature", "0.01", "--reference-compat"], []),
])
def test_a_setting_of_an_objective_the_run_does_not_train_is_named(tmp_path: Path, flags: list[str],
                                                                     said: list[str]) -> None:
    from tacl_scale.train import parse_args

    base = ["--ds", str(ROOT / "ds_configs" / "cpu.json"), "--data", "d", "--model", "m", "--output",
            str(tmp_path / "run")]
    assert parse_args(base + flags).settings_without_effect() == said


def test_a_model_with_fewer_positions_than_the_data_is_refused_leaving_no_run_directory(
        join: Callable[[], Distributed], dataset: Path, model_file: Path, tmp_path: Path) -> None:
    """Refused once the model is built, after the run's lock made --output: the
    directory the lock made, empty, goes with the lock (it was left behind), and so
    does the parent it made for it."""
    from tacl_scale.data import Manifest

    short = tmp_path / "short.json"
    settings = json.loads(model_file.read_text())
    settings["max_position_embeddings"] = Manifest.load(dataset).max_seq_len - 1
    short.write_text(json.dumps(settings))
    run = tmp_path / "runs" / "run"
    with pytest.raises(TrainError, match=rf"sequences up to \d+ tokens, the model has "
                                         rf"{settings['max_position_embeddings']} positions \({short}\)"):
        Trainer.build(make_config(dataset, short, run), join())
    assert not run.exists() and not (tmp_path / "runs").exists()


def test_a_tacl_kernel_the_device_cannot_run_is_refused_before_a_step(
        join: Callable[[], Distributed], dataset: Path, model_file: Path, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """--tacl-impl triton on the CPU was a traceback at the first step; --cuda-graphs
    there changed nothing without a word."""
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    config = make_config(dataset, model_file, tmp_path / "run", export=False)
    triton = replace(config, objective=replace(config.objective, tacl_impl="triton"))
    with pytest.raises(TrainError, match=r"--tacl-impl triton runs on CUDA GPUs \(on the CPU only in Triton's "
                                         r"interpreter, TRITON_INTERPRET=1.*: leave it at auto"):
        Trainer.build(triton, join())
    assert not (tmp_path / "run").exists()
    without_tacl = replace(triton, objective=replace(triton.objective, objectives=("mlm", "nsp")))
    Trainer.build(without_tacl, join()).close()  # the kernel is not used
    graphs = replace(config, output=str(tmp_path / "graphs"),
                     performance=replace(config.performance, cuda_graphs=True))
    with caplog.at_level("WARNING", logger="tacl_scale.trainer"):
        Trainer.build(graphs, join()).close()
    assert "--cuda-graphs replays CUDA graphs: on the CPU it changes nothing" in caplog.text


def test_export_verifies_the_checkpoint_it_reads(join: Callable[[], Distributed], dataset: Path, model_file: Path,
                                                 tmp_path: Path, caplog: pytest.LogCaptureFixture,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """A bit flipped in the newest checkpoint: exporting it by name is refused in
    one line; exporting the run directory takes the older checkpoint and says so."""
    from tacl_scale.export import EXPORT_MARKER, export_checkpoint, main

    run = tmp_path / "run"
    trainer = Trainer.build(make_config(dataset, model_file, run, steps=4, export=False,
                                        checkpoint=CheckpointConfig(save_every=2)), join())
    try:
        trainer.train()
    finally:
        trainer.close()
    newest = run / "checkpoints" / "step00000004"
    optim = next(newest.glob("*optim_states.pt"))
    data = bytearray(optim.read_bytes())
    data[len(data) // 3] ^= 0x10
    optim.write_bytes(bytes(data))
    with pytest.raises(ValueError, match="step00000004: does not verify.*checksum mismatch"):
        export_checkpoint(newest, tmp_path / "bad")
    assert not (tmp_path / "bad").exists()
    capsys.readouterr()
    assert main([str(newest), str(tmp_path / "bad")]) == 2
    errors = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(errors) == 1 and errors[0].startswith(f"error: {newest}: does not verify"), errors
    with caplog.at_level("INFO", logger="tacl_scale.export"):
        export_checkpoint(run, tmp_path / "older")
    assert "exporting step00000002, an older checkpoint than the newest" in caplog.text
    assert json.loads((tmp_path / "older" / EXPORT_MARKER).read_text())["source"] == str(run / "checkpoints" /
                                                                                      "step00000002")
    # A checkpoint without its record (as older versions saved) named outright: its
    # torch files are checked whole, and a truncated one is refused, not a traceback.
    older = run / "checkpoints" / "step00000002"
    (older / "files.json").unlink()
    model_states = next(older.glob("mp_rank_*_model_states.pt"))
    model_states.write_bytes(model_states.read_bytes()[:1000])
    with pytest.raises(ValueError, match=f"{older}: does not verify, not exported: {model_states}: not a whole"):
        export_checkpoint(older, tmp_path / "truncated")
    assert not (tmp_path / "truncated").exists()
    weights, config = tmp_path / "older" / "model.safetensors", tmp_path / "older" / "config.json"
    assert weights.stat().st_mode & 0o777 == config.stat().st_mode & 0o777  # not owner-only


def test_a_model_folder_with_tokenizer_settings_alone_is_no_tokenizer_source(dataset: Path, tmp_path: Path) -> None:
    """A --model folder holding tokenizer_config.json but no vocabulary (as some
    checkpoints carry) was taken as the run's tokenizer: the run trained to its last
    step and its export then had none. The dataset's tokenizer is taken instead."""
    from tacl_scale.data import PretrainDataset
    from tacl_scale.run_tokenizer import tokenizer_source

    model = tmp_path / "model"
    model.mkdir()
    (model / "tokenizer_config.json").write_text("{}", encoding="utf-8")
    data = PretrainDataset(dataset)
    source = tokenizer_source(str(model), data)
    assert source.directory is None and Path(source.vocab_file) == data.manifest.tokenizer.location(dataset).resolve()
    (model / "vocab.txt").write_text("[PAD]\n[UNK]\n", encoding="utf-8")
    assert tokenizer_source(str(model), data).directory == str(model.resolve())


def test_a_standalone_rank_picks_another_port_when_its_own_was_taken(monkeypatch: pytest.MonkeyPatch) -> None:
    """``tacl-train`` in a shell asks the kernel for a free port, then binds it: a
    port another process bound in between failed the run with EADDRINUSE (and made
    the tests that join a group flaky). It picks another and joins."""
    import socket

    from tacl_scale import distributed
    from tacl_scale.distributed import Distributed, LaunchEnv

    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    offered = [taken.getsockname()[1]]
    real = distributed.free_port
    monkeypatch.setattr(distributed, "free_port", lambda host: offered.pop() if offered else real(host))
    for key in LAUNCHER_VARIABLES:  # set, then removed: put back as they were after the test, even if absent
        monkeypatch.setenv(key, "")
        monkeypatch.delenv(key)
    try:
        dist = Distributed.setup(LaunchEnv.standalone_here())
        try:
            assert dist.world_size == 1 and not offered
            assert os.environ["MASTER_PORT"] != str(taken.getsockname()[1])
        finally:
            dist.close()
    finally:
        taken.close()


def test_a_resume_reads_run_json_once(join: Callable[[], Distributed], dataset: Path, model_file: Path,
                                     tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The settings check, the data check and the job's record each read run.json
    (three parses of a file that grows with every job's history): now one read
    under the run's lock, passed down."""
    config = make_config(dataset, model_file, tmp_path / "run", steps=4, export=False,
                         checkpoint=CheckpointConfig(save_every=2, stop_after_steps=2))
    run_job(config, join)
    reads = []
    real = RunDir.read_record
    monkeypatch.setattr(RunDir, "read_record", lambda self: reads.append(self.path) or real(self))
    resumed = Trainer.build(replace(config, checkpoint=CheckpointConfig(save_every=2, resume=True)), join())
    try:
        assert resumed.state.step == 2 and reads == [tmp_path / "run"]
    finally:
        resumed.close()
    assert [s.started_at_step for s in RunDir(tmp_path / "run").read_record().history] == [0, 2]


def test_metrics_records_are_read_in_order_without_a_cut_line(tmp_path: Path) -> None:
    """What tests, experiments and a user's notebook read metrics.jsonl with: steps
    and events in the order logged, a blank line, a non-object line and a line cut
    by a kill (the last) left out; step_records keeps the applied steps."""
    path = tmp_path / "metrics.jsonl"
    path.write_text('{"step": 1, "loss": 2.0}\n\n{"event": "eval", "at_step": 1}\n[1, 2]\n'
                    '{"event": "skipped_update", "after_step": 1}\n{"step": 2, "loss": 1.5}\n{"step": 3, "lo')
    records = read_records(path)
    assert [r.get("step", r.get("event")) for r in records] == [1, "eval", "skipped_update", 2]
    assert step_records(records) == [{"step": 1, "loss": 2.0}, {"step": 2, "loss": 1.5}]


def test_an_evaluation_is_a_console_line_too(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """It went only to metrics.jsonl and TensorBoard: the console showed no sign of it."""
    from tacl_scale.metrics import MetricsLogger
    from tacl_scale.run_dir import RunDir

    logger = MetricsLogger(RunDir(tmp_path), True, total_steps=6, log_every=10, first_step=0)
    logger.log_evaluation(4, {"loss": 4.6, "mlm": 3.25, "selfsim_layer0": 0.9, "selfsim_layer10": 0.5,
                              "selfsim_layer2": 0.7})
    logger.close()
    assert capsys.readouterr().out == "eval at step 4  loss 4.6000  mlm 3.2500  self-similarity of layer 10 0.5000\n"
    [record] = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert record == {"event": "eval", "at_step": 4, "loss": 4.6, "mlm": 3.25, "selfsim_layer0": 0.9,
                      "selfsim_layer10": 0.5, "selfsim_layer2": 0.7}


def test_a_resumed_job_logs_no_step_twice(tmp_path: Path) -> None:
    """Steps, evaluations and skipped updates logged after the checkpoint a job
    resumes from are done again: the earlier job's records of them are dropped;
    an evaluation at the checkpoint's step stays (the resumed job starts after it)."""
    from tacl_scale.metrics import MetricsLogger
    from tacl_scale.run_dir import RunDir

    lines = [{"step": k, "loss": float(k)} for k in (1, 2, 3)] + [
        {"event": "eval", "at_step": 3, "loss": 3.3}, {"event": "skipped_update", "after_step": 3, "skipped_steps": 1},
        {"step": 4, "loss": 4.0}, {"event": "eval", "at_step": 4, "loss": 4.4}]
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines) + '{"step": 5, "lo')
    logger = MetricsLogger(RunDir(tmp_path), True, total_steps=6, log_every=10, first_step=3)
    logger.log_step(4, {"loss": 4.5, "lr": 0.1, "samples_per_s": 1.0})
    logger.log_scalars("eval", 4, {"loss": 4.6})
    logger.close()
    records = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [(r.get("step"), r.get("event"), r.get("at_step")) for r in records] == [
        (1, None, None), (2, None, None), (3, None, None), (None, "eval", 3), (4, None, None), (None, "eval", 4)]
    assert records[-2]["loss"] == 4.5 and records[-1]["loss"] == 4.6


def test_the_models_tokenizer_is_compared_token_by_token_whatever_its_files(dataset: Path, tmp_path: Path) -> None:
    """A model directory whose tokenizer is a tokenizer.json (no vocab.txt, as
    save_pretrained of a fast tokenizer writes it) with two tokens swapped is
    refused, naming a token and its two ids; the same vocabulary passes."""
    from tokenizers import BertWordPieceTokenizer
    from transformers import BertConfig, BertForPreTraining

    from tacl_scale.data import PretrainDataset
    from tacl_scale.input_checks import check_data_and_model

    ds = PretrainDataset(dataset)
    lines = ds.manifest.tokenizer.location(dataset).read_text(encoding="utf-8").splitlines()
    student = BertForPreTraining(BertConfig(**TINY_BERT))
    for name, vocab in (("same", lines), ("swapped", [lines[1], lines[0], *lines[2:]])):
        model = tmp_path / name
        student.save_pretrained(model)
        (tmp_path / f"{name}.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")
        BertWordPieceTokenizer(str(tmp_path / f"{name}.txt")).save(str(model / "tokenizer.json"))
        assert not (model / "vocab.txt").exists()
    check_data_and_model([ds], student, str(tmp_path / "same"))
    with pytest.raises(TrainError, match=r"gives other ids \('\[PAD\]': 0 in the dataset, 1 in the model\)"):
        check_data_and_model([ds], student, str(tmp_path / "swapped"))


def test_a_pretrained_model_without_a_tokenizer_takes_the_datasets_only_of_its_vocabulary_size(
        dataset: Path, tmp_path: Path) -> None:
    """--model a folder of config.json and weights alone (its tokenizer not copied):
    the check against the model's tokenizer was skipped, without a word, and a run on
    a 4000-token vocabulary trained a 30522-token model and exported the 4000 lines
    beside vocab_size 30522. Another size is refused; the same size, or a few rows more
    (a checkpoint's padding, 30522 tokens in 30528 rows), is taken, said."""
    from transformers import BertConfig, BertForPreTraining, BertModel

    from tacl_scale.data import PretrainDataset
    from tacl_scale.input_checks import check_data_and_model

    ds = PretrainDataset(dataset)
    tok = ds.manifest.tokenizer
    for vocab_size in (30522, tok.vocab_size, tok.vocab_size + 6):
        model = tmp_path / f"encoder-{vocab_size}"
        settings = BertConfig(**{**TINY_BERT, "vocab_size": vocab_size})
        BertModel(settings, add_pooling_layer=False).save_pretrained(model)  # a sentence encoder's files, no tokenizer
        student = BertForPreTraining(settings)
        if vocab_size == 30522:
            with pytest.raises(TrainError) as refused:
                check_data_and_model([ds], student, str(model))
            assert str(refused.value) == (
                f"{model}: holds no tokenizer (vocab.txt, tokenizer.json or a sentencepiece .model), and {dataset} was "
                f"tokenized with {tok.file}, a vocabulary of {tok.vocab_size} tokens, where the model has 30522 (its "
                "config.json vocab_size): not the vocabulary its weights were trained with; put the model's own "
                f"tokenizer files in {model} and rebuild the dataset with --tokenizer {model}")
        else:
            assert check_data_and_model([ds], student, str(model)) == [
                f"{model} holds no tokenizer: {dataset}'s ({tok.file}, {tok.vocab_size} tokens; the model's vocab_size "
                f"is {vocab_size}) is taken to be the model's, and the run's tokenizer/ and its export get it; put the "
                "model's own tokenizer files in the folder if it is another"]
    # A BertConfig JSON is a random init: the dataset's tokenizer is the model's by construction, said by no one.
    (tmp_path / "bert.json").write_text(json.dumps(TINY_BERT))
    assert check_data_and_model([ds], BertForPreTraining(BertConfig(**TINY_BERT)), str(tmp_path / "bert.json")) == []


@pytest.mark.parametrize("says", ["tokenizer_config.json", "tokenizer.json"])
def test_a_dataset_lowercased_otherwise_than_the_models_tokenizer_is_refused_naming_both(
        dataset: Path, tmp_path: Path, says: str) -> None:
    """The model's vocabulary built with(out) --no-lowercase against the model's
    tokenizer's own setting trained: the same ids, but the run's tokenizer and export
    (the model's) cut text otherwise than the data the run trained on."""
    from tokenizers import BertWordPieceTokenizer
    from transformers import BertConfig, BertForPreTraining

    from tacl_scale.data import PretrainDataset
    from tacl_scale.input_checks import check_data_and_model
    from tacl_scale.vocab import has_capitals, vocabulary

    ds = PretrainDataset(dataset)
    vocab = ds.manifest.tokenizer.location(dataset)
    # The made Chinese vocabulary is uncased and the build lower-cased with it.
    assert ds.manifest.tokenizer.lowercase is True and not has_capitals(vocabulary(vocab))
    student = BertForPreTraining(BertConfig(**TINY_BERT))

    def model_folder(name: str, lowercase: bool | None) -> Path:
        model = tmp_path / name
        model.mkdir()
        shutil.copy(vocab, model / "vocab.txt")
        if lowercase is not None and says == "tokenizer_config.json":
            (model / "tokenizer_config.json").write_text(json.dumps({"do_lower_case": lowercase}), encoding="utf-8")
        elif lowercase is not None:
            BertWordPieceTokenizer(str(vocab), lowercase=lowercase).save(str(model / "tokenizer.json"))
        return model

    # Lower-cased data for a model that keeps the case of an uncased vocabulary (as
    # bert-base-chinese's tokenizer_config.json says): nothing is lost, it trains.
    assert check_data_and_model([ds], student, str(model_folder("keeps_case", False))) == []
    # As built with --no-lowercase: the model lower-cases, the data did not.
    ds.manifest = replace(ds.manifest, tokenizer=replace(ds.manifest.tokenizer, lowercase=False))
    lowercases = model_folder("lowercases", True)
    with pytest.raises(TrainError) as refused:
        check_data_and_model([ds], student, str(lowercases))
    setting = ("tokenizer_config.json do_lower_case" if says == "tokenizer_config.json"
               else "tokenizer.json's normalizer lowercase")
    assert str(refused.value) == (
        f"{dataset} was tokenized without lower-casing, and the tokenizer of {lowercases} lower-cases ({setting} "
        "true): the run's tokenizer and export, the model's, would tokenize text otherwise than the data it trained "
        "on; rebuild the dataset without --no-lowercase")
    assert check_data_and_model([ds], student, str(model_folder("same", False))) == []
    assert check_data_and_model([ds], student, str(model_folder("silent", None))) == []  # says nothing: nothing said


def test_an_encoders_new_heads_are_said_once_by_name_and_not_on_resume(
        join: Callable[[], Distributed], dataset: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A sentence encoder (no MLM/NSP heads) as --model: each start said "initialised
    8 missing weights" naming 6 of them (never the NSP head), and a resume said it too,
    although the heads then came from the checkpoint."""
    from transformers import BertConfig, BertModel

    model = tmp_path / "encoder"
    BertModel(BertConfig(**TINY_BERT)).save_pretrained(model)
    shutil.copy(PretrainDataset(dataset).manifest.tokenizer.location(dataset), model / "vocab.txt")
    config = make_config(dataset, model, tmp_path / "run", steps=2, export=False,
                         checkpoint=CheckpointConfig(save_every=1, stop_after_steps=1))
    said = (f"student: the MLM head (cls.predictions.*: 6 weights) and the NSP head (cls.seq_relationship.*: 2 "
            f"weights) are new: initialised at random (not in {model})")
    with caplog.at_level(logging.INFO, logger="tacl_scale"):
        run_job(config, join)
    assert [r.getMessage() for r in caplog.records if "initialised" in r.getMessage()] == [said]
    caplog.clear()
    resume = replace(config, checkpoint=CheckpointConfig(save_every=1, resume=True))
    with caplog.at_level(logging.INFO, logger="tacl_scale"):
        run_job(resume, join)
    assert "resumed from " in caplog.text
    assert [r.getMessage() for r in caplog.records if "initialised" in r.getMessage()] == []


def test_a_job_ended_by_stop_after_steps_says_where_it_stopped(join: Callable[[], Distributed], dataset: Path,
                                                               model_file: Path, tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    """It printed no progress line (the step was no multiple of --log-every) and
    nothing else: a job that had trained and checkpointed looked like one that had not."""
    config = replace(make_config(dataset, model_file, tmp_path / "run", steps=8, export=False,
                                 checkpoint=CheckpointConfig(save_every=100, stop_after_steps=3)), log_every=100)
    run_job(config, join)
    out = capsys.readouterr().out
    assert re.search(r"^step 3/8  loss ", out, re.M), out
    assert out.endswith("stopped at step 3 of 8 (--stop-after-steps 3), checkpointed: rerun with --resume to "
                        "continue\n"), out
    assert (tmp_path / "run" / "checkpoints" / "step00000003").is_dir()


def test_two_datasets_of_different_tokenizers_are_refused_naming_both(dataset: Path, tmp_path: Path) -> None:
    """A blend of datasets whose ids mean other tokens: it said only "tokenizer
    differs"; the error now names both vocabularies and the fix."""
    from transformers import BertConfig, BertForPreTraining

    from tacl_scale.data import PretrainDataset
    from tacl_scale.input_checks import check_data_and_model

    vocab = tmp_path / "vocab.txt"
    vocab.write_text(ZH_VOCAB.read_text(encoding="utf-8") + "[EXTRA]\n", encoding="utf-8")
    other = build_dataset(tmp_path / "other", "--input", str(ZH_TEXT), "--format", "text", "--language", "zh",
                          "--tokenizer", str(vocab), "--min-doc-chars", "10", "--dupe-factor", "1", "--max-seq-len", "64")
    first, second = PretrainDataset(dataset), PretrainDataset(other)
    with pytest.raises(TrainError) as refused:
        check_data_and_model([first, second], BertForPreTraining(BertConfig(**TINY_BERT)), "bert.json")
    assert str(refused.value) == (
        f"{other}: built with another tokenizer than {dataset} (vocab.txt, sha256 "
        f"{second.manifest.tokenizer.sha256[:12]}…, against {first.manifest.tokenizer.file}, sha256 "
        f"{first.manifest.tokenizer.sha256[:12]}…): "
        "the same ids would be other tokens; rebuild it with the other's --tokenizer")


def test_resume_refuses_a_dataset_rebuilt_in_place_unless_allowed(join: Callable[[], Distributed], dataset: Path,
                                                                  model_file: Path, tmp_path: Path) -> None:
    """Rebuilt under the run with another seed, the dataset was trained on from the
    checkpoint's sample on, silently: another dataset's instances in the same order."""
    data = tmp_path / "ds"
    shutil.copytree(dataset, data)
    run = tmp_path / "run"
    config = make_config(data, model_file, run, steps=4, export=False,
                         checkpoint=CheckpointConfig(save_every=2, stop_after_steps=2))
    run_job(config, join)
    recorded = json.loads((run / "run.json").read_text())
    assert recorded["data_fingerprints"] == [PretrainDataset(data).manifest.content_fingerprint()]
    moved = tmp_path / "moved"
    shutil.copytree(data, moved)  # a copy of the same dataset is the same data
    assert PretrainDataset(moved).manifest.content_fingerprint() == recorded["data_fingerprints"][0]
    build_dataset(data, "--input", str(ZH_TEXT), "--format", "text", "--language", "zh", "--tokenizer", str(ZH_VOCAB),
                  "--min-doc-chars", "10", "--dupe-factor", "1", "--max-seq-len", "64", "--seed", "7", "--overwrite")
    resume = replace(config, checkpoint=CheckpointConfig(save_every=2, resume=True))
    with pytest.raises(TrainError, match=rf"--resume on other data than the run's \(run.json\): data content: {data}: "
                                         r"not the dataset the run trained on \(rebuilt in place\?\).*allow-changes"):
        Trainer.build(resume, join())
    assert json.loads((run / "run.json").read_text()) == recorded  # the record is not rewritten
    run_job(replace(resume, checkpoint=replace(resume.checkpoint, allow_changes=True)), join)
    record = json.loads((run / "run.json").read_text())
    assert record["data_fingerprints"] == [PretrainDataset(data).manifest.content_fingerprint()]
    assert record["data_fingerprints"] != recorded["data_fingerprints"]
    assert record["history"][1]["changes"][0].startswith(f"data content: {data}: ")


def test_resume_refuses_other_settings_unless_allowed_and_records_them(join: Callable[[], Distributed], dataset: Path,
                                                                       model_file: Path, tmp_path: Path) -> None:
    run = tmp_path / "run"
    config = make_config(dataset, model_file, run, steps=4, export=False,
                         checkpoint=CheckpointConfig(save_every=2, stop_after_steps=2))
    run_job(config, join)
    recorded = json.loads((run / "run.json").read_text())
    resume = CheckpointConfig(save_every=2, resume=True)
    changed = replace(config, checkpoint=resume, optim=replace(config.optim, lr=5e-3, steps=8, weight_decay=0.05),
                      objective=ObjectiveConfig(("mlm", "nsp")))
    with pytest.raises(TrainError, match=r"other settings.*objective.objectives.*optim.lr: 0.001 -> 0.005.*allow-changes"):
        Trainer.build(changed, join())
    assert json.loads((run / "run.json").read_text()) == recorded  # the record is not rewritten
    allowed = replace(changed, checkpoint=replace(resume, allow_changes=True))
    trainer = Trainer.build(allowed, join())
    try:
        # The new settings are in force from the first resumed update: DeepSpeed had
        # restored the old peak lr, the old weight decay and the old schedule's lr.
        scheduler = trainer.parts.engine.scheduler
        next_lr = 5e-3 * allowed.optim.lr_factor(2)
        assert trainer.state.step == 2 and next_lr != pytest.approx(config.optim.lr * config.optim.lr_factor(2))
        assert scheduler.get_last_lr() == pytest.approx([next_lr, next_lr])
        groups = scheduler.optimizer.param_groups
        assert [g["lr"] for g in groups] == pytest.approx([next_lr, next_lr])
        assert [g["weight_decay"] for g in groups] == [0.05, 0.0]
    finally:
        trainer.close()
    history = json.loads((run / "run.json").read_text())["history"]
    assert [h["started_at_step"] for h in history] == [0, 2]
    assert history[0]["changes"] == [] and any(c.startswith("optim.lr: 0.001 -> 0.005") for c in history[1]["changes"])
    # A checkpoint past --steps trained and exported nothing, silently.
    fewer = replace(allowed, optim=replace(allowed.optim, steps=1))
    with pytest.raises(TrainError, match=r"step00000002: the run is at step 2, past --steps 1: resume with --steps "
                                         r"above 2 \(and --allow-changes\)"):
        Trainer.build(fewer, join())
    assert json.loads((run / "run.json").read_text())["history"] == history


def test_a_second_job_on_a_live_run_is_refused_in_one_line(join: Callable[[], Distributed], dataset: Path,
                                                           model_file: Path, tmp_path: Path) -> None:
    run = tmp_path / "run"
    config = make_config(dataset, model_file, run, steps=4, export=False)
    live = Trainer.build(config, join())
    try:
        with pytest.raises(TrainError, match=r"run: in use by training pid \d+ on "):
            Trainer.build(replace(config, checkpoint=CheckpointConfig(resume=True)), join())
        # Without --resume it said "pass --resume to continue it", which the lock then refused.
        with pytest.raises(TrainError, match=r"run: holds a run in use by training pid \d+ on .*; wait for it to "
                                             r"end \(or stop it\), then pass --resume"):
            Trainer.build(config, join())
    finally:
        live.close()
    assert not (run / ".tacl-lock").exists()  # removed by its holder on close
    again = Trainer.build(replace(config, checkpoint=CheckpointConfig(resume=True)), join())  # released on close
    again.close()


def test_precision_auto_is_bf16_where_the_gpu_has_it_and_the_papers_fp16_one_flag_away(tmp_path: Path) -> None:
    auto = EngineConfig.from_file(Path(__file__).resolve().parents[1] / "ds_configs" / "zero2.json")
    assert auto.precision == "auto"
    assert auto.precision_on("cuda", bf16_supported=True) == "bf16"
    assert auto.precision_on("cuda", bf16_supported=False) == "fp16"  # V100, T4
    assert auto.precision_on("cpu") == "fp32"
    assert auto.precision_on("cuda", asked="fp16") == "fp16" and auto.precision_on("cpu", asked="fp16") == "fp32"
    assert EngineConfig("x", BF16).precision_on("cuda", asked="fp32") == "fp32"
    config = make_config(tmp_path, tmp_path, tmp_path, settings=auto.settings)
    for precision in ("bf16", "fp16"):
        ds = deepspeed_config(config, 2, "cuda", precision=precision)
        assert ds["bf16"]["enabled"] is (precision == "bf16") and ds["fp16"]["enabled"] is (precision == "fp16")
        assert ds["fp16"]["initial_scale_power"] == 16  # the loss-scaling settings stay for fp16
    legacy = deepspeed_config(make_config(tmp_path, tmp_path, tmp_path, settings=FP32 | {"bfloat16": {
        "enabled": True}}), 1, "cuda", precision="bf16")
    assert legacy["bf16"] == {"enabled": True} and "bfloat16" not in legacy
    with pytest.raises(ConfigError, match="--precision"):
        PerformanceConfig(precision="fp8")


def test_one_rank_drops_overlap_comm_which_only_makes_zero_wait(tmp_path: Path) -> None:
    """ZeRO's overlap_comm synchronises the device after every micro-batch's backward
    and every bucket; with one rank there is no reduction to overlap."""
    settings = {"zero_optimization": {"stage": 2, "overlap_comm": True}}
    config = make_config(tmp_path, tmp_path, tmp_path, settings=settings)
    assert deepspeed_config(config, 1, "cuda")["zero_optimization"]["overlap_comm"] is False
    assert deepspeed_config(config, 2, "cuda")["zero_optimization"]["overlap_comm"] is True
    assert settings["zero_optimization"]["overlap_comm"] is True


def test_auto_micro_batch_is_the_largest_divisor_that_fits() -> None:
    from transformers import BertConfig, BertForPreTraining

    from tacl_scale.memory import TACL, auto_micro_batch, parameter_count, training_bytes

    tiny = BertConfig(vocab_size=1000, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                      intermediate_size=64, max_position_embeddings=64)
    assert parameter_count(tiny) == sum(p.numel() for p in BertForPreTraining(tiny).parameters())
    base = BertConfig()  # BERT-base
    assert 100e6 < parameter_count(base) < 120e6
    gib = 2**30
    # The H200 measurement (22.7 GiB at micro 256, length 256) stays under the estimate.
    assert 22.7 * gib < training_bytes(base, 256, 256, TACL) < 40 * gib
    assert auto_micro_batch(base, 256, 256, TACL, 141 * gib) == 256  # H200, one GPU
    assert auto_micro_batch(base, 32, 256, TACL, 141 * gib) == 32  # H200, 8 per node
    on_16 = auto_micro_batch(base, 256, 256, TACL, 16 * gib)
    assert 256 % on_16 == 0 and training_bytes(base, on_16, 256, TACL) <= 0.9 * 16 * gib
    assert training_bytes(base, 2 * on_16, 256, TACL) > 0.9 * 16 * gib or 256 % (2 * on_16)
    assert auto_micro_batch(base, 96, 512, TACL, 16 * gib) in (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 96)
    assert auto_micro_batch(base, 256, 256, TACL, None) == 32 and auto_micro_batch(base, 12, 256, TACL, None) == 12
    assert auto_micro_batch(base, 256, 256, TACL, 1 * gib) == 1  # nothing fits: 1, and the step says so


def test_auto_micro_batch_counts_mirrors_views_an_fp32_teacher_and_fp32_activations() -> None:
    """The estimate counted one student pass and a half teacher whatever the run:
    model-1 (mlm,nsp,mirror) runs the student on the masked input and on two views,
    three passes' activations, and auto chose 256 for it on a 40 GiB GPU (about
    32 GiB estimated, about 60 needed)."""
    from transformers import BertConfig

    from tacl_scale.memory import (
        SAFETY,
        TACL,
        Workload,
        activation_bytes_per_token,
        auto_micro_batch,
        parameter_count,
        training_bytes,
    )

    base, gib = BertConfig(), 2**30
    assert Workload.of(("tacl", "mlm", "nsp"), torch.float16, "bf16") == TACL
    model_1 = Workload.of(("mlm", "nsp", "mirror"), None, "bf16")
    assert (model_1.encoder_passes, model_1.teacher_bytes_per_parameter) == (3, 0)
    assert Workload.of(("mirror",), None, "bf16") == Workload(0, 2, False, 1)
    one_pass = activation_bytes_per_token(base, Workload(0, 1, False, 1))
    assert activation_bytes_per_token(base, model_1) == pytest.approx(
        3 * one_pass + activation_bytes_per_token(base, Workload(0, 0, True, 1)))
    assert activation_bytes_per_token(base, model_1) > 2.5 * activation_bytes_per_token(base, TACL)
    assert auto_micro_batch(base, 256, 256, TACL, 40 * gib) == 256
    assert auto_micro_batch(base, 256, 256, model_1, 40 * gib) < 256
    assert training_bytes(base, auto_micro_batch(base, 256, 256, model_1, 40 * gib), 256, model_1) <= 0.9 * 40 * gib
    # --reference-compat: an fp32 teacher (4 bytes a weight); an fp32 student's activations are twice a half one's.
    compat = Workload.of(("tacl", "mlm", "nsp"), torch.float32, "fp32")
    assert compat.teacher_bytes_per_parameter == 4
    assert training_bytes(base, 8, 256, compat) - training_bytes(base, 8, 256, TACL) == pytest.approx(
        SAFETY * (2 * parameter_count(base) + 8 * 256 * activation_bytes_per_token(base, TACL)))


def test_the_ds_configs_leave_the_micro_batch_to_the_trainer() -> None:
    from tacl_scale.train import parse_args

    root = Path(__file__).resolve().parents[1]
    for name in ("zero2.json", "zero2_bf16.json", "zero1_bf16.json"):
        config = parse_args(["--ds", str(root / "ds_configs" / name), "--data", "d", "--model", "m", "--output", "o"])
        assert config.optim.micro_batch_size is None and config.optim.batch_size == 256, name
        asked = parse_args(["--ds", str(root / "ds_configs" / name), "--data", "d", "--model", "m", "--output", "o",
                            "--micro-batch-size", "64", "--precision", "fp16"])
        assert asked.optim.micro_batch_size == 64 and asked.performance.precision == "fp16"


def test_a_run_directory_of_the_code_before_run_dir_resumes_and_exports(
        join: Callable[[], Distributed], dataset: Path, model_file: Path, tmp_path: Path) -> None:
    """tests/fixtures/run_json_v2.json is the run.json that the code before
    tacl_scale.run_dir wrote for this run's first two steps (45e88c1, its paths made
    placeholders): RunRecord reads it, the resume check takes its settings as the
    same, the new job is added to its history and the export finds its BertConfig."""
    from tacl_scale.run_dir import RunDir

    run = tmp_path / "run"
    run_job(make_config(dataset, model_file, run, export=False,
                        checkpoint=CheckpointConfig(save_every=100, stop_after_steps=2)), join)
    written = (Path(__file__).parent / "fixtures" / "run_json_v2.json").read_text()
    tokenizer = PretrainDataset(dataset).manifest.tokenizer.location(dataset).resolve()
    (run / "run.json").write_text(written.replace("{dataset}", str(dataset)).replace("{model}", str(model_file))
                                  .replace("{run}", str(run)).replace("{tokenizer}", str(tokenizer)))
    resumed = Trainer.build(make_config(dataset, model_file, run, checkpoint=CheckpointConfig(resume=True)), join())
    try:
        assert resumed.state.step == 2
        resumed.train()
    finally:
        resumed.close()
    record = RunDir(run).read_record()
    assert [(s.started_at_step, s.changes) for s in record.history] == [(0, []), (2, [])]
    assert record.student_config is not None and record.student_config["hidden_size"] == 32
    assert json.loads((run / "export" / "config.json").read_text())["hidden_size"] == 32
