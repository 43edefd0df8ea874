"""The training loop: a :class:`Trainer` builds a run once and ``train()`` runs it.

Building (``Trainer(config, dist)``): the datasets, the student and its frozen
teacher, the DeepSpeed engine around the student (optimizer and schedule included),
the resume state, the data loader from the saved global data position, the validation
batches and the metrics logger. Running: every iteration of :meth:`Trainer.train`
is ``train_step`` → log → maybe evaluate → maybe checkpoint → preemption check.

The step counter counts optimizer updates actually applied: when fp16's loss scaler
finds non-finite gradients DeepSpeed skips the update and does not advance the
schedule, and neither does the counter, so the warm-up keeps its length, the logged
lr is the one each update used, and after ``--steps`` updates the lr is 0.
"""

from __future__ import annotations

import json
import logging
import signal
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import torch

from . import checkpoint
from .attention import varlen_unsupported
from .config import ConfigError, TrainConfig
from .data import PretrainDataset
from .data.loader import (
    BlendedDatasets,
    CollateConfig,
    DynamicMasking,
    MicroBatchSampler,
    TrainingInstances,
    collate,
    sequence_lengths,
)
from .data.manifest import file_sha256
from .data.shuffle import DIGEST_MODULUS, BatchLayout, GlobalOrder, sample_digest
from .data.views import MirrorViews
from .distributed import Distributed
from .evaluation import evaluate, layer_self_similarity
from .export import (
    RUN_FILE,
    export_checkpoint,
    export_student,
    snapshot_tokenizer,
    student_config_dict,
    tokenizer_source,
)
from .flops import mfu, peak_flops, step_flops
from .metrics import MetricsLogger
from .model import PretrainingModule, default_teacher_dtype, load_student, make_teacher, teacher_states

log = logging.getLogger("tacl_scale.trainer")

PREEMPTED_MARKER = "PREEMPTED"


class TrainError(RuntimeError):
    """Training refused to start or cannot go on; the message says why."""


def deepspeed_config(config: TrainConfig, world_size: int, device_type: str,
                     load_universal: bool = False) -> dict[str, Any]:
    """The DeepSpeed JSON with batch sizes, clipping and precision settled for
    ``world_size`` ranks on ``device_type`` (a pure function of the config);
    ``load_universal`` when this job resumes from a universal checkpoint."""
    engine = config.engine
    ds = json.loads(json.dumps(engine.settings))  # a deep copy
    if "zero_optimization" not in ds:
        raise TrainError(f"{engine.path}: no zero_optimization section (ZeRO stage)")
    if "scheduler" in ds:
        raise TrainError(f"{engine.path}: remove 'scheduler': train.py builds the warm-up/decay "
                         "schedule from --steps and --warmup-ratio")
    optimizer = ds.pop("optimizer", None)
    if optimizer is not None and str(optimizer.get("type", "")).lower() not in ("adam", "adamw"):
        raise TrainError(f"{engine.path}: optimizer {optimizer.get('type')!r}; TaCL trains with "
                         "AdamW (its params are read as defaults of --lr/--weight-decay)")
    optim = config.optim
    per_step = optim.micro_batch_size * world_size
    if optim.batch_size % per_step:
        raise TrainError(
            f"batch size {optim.batch_size} is not a multiple of micro-batch {optim.micro_batch_size} × "
            f"{world_size} rank(s)"
        )
    ds["train_batch_size"] = optim.batch_size
    ds["train_micro_batch_size_per_gpu"] = optim.micro_batch_size
    ds["gradient_accumulation_steps"] = optim.batch_size // per_step
    ds["gradient_clipping"] = optim.grad_clip
    if load_universal:  # resuming at another number of ranks, from a universal conversion
        ds.setdefault("checkpoint", {})["load_universal"] = True
    ds.setdefault("steps_per_print", 10**9)  # train.py prints its own progress
    if device_type == "cpu" and engine.precision == "fp16":
        ds["fp16"]["enabled"] = False  # the CPU accelerator has no fp16 training
    return ds


def check_data_and_model(datasets: list[PretrainDataset], student: Any, model_path: str) -> None:
    """Refuse a dataset whose tokenizer does not match the model, or whose
    sequences are longer than the model's positions."""
    first = datasets[0].manifest.tokenizer
    for ds in datasets[1:]:
        if ds.manifest.tokenizer.sha256 != first.sha256:
            raise TrainError(f"{ds.path}: tokenizer differs from {datasets[0].path}'s")
    vocab_file = Path(model_path) / "vocab.txt"
    if vocab_file.is_file() and file_sha256(vocab_file) != first.sha256:
        raise TrainError(
            f"{datasets[0].path} was tokenized with {first.file} (sha256 {first.sha256[:12]}…) but "
            f"the model's {vocab_file} differs: rebuild the dataset with --tokenizer {vocab_file}"
        )
    config = student.config
    if first.vocab_size > config.vocab_size:
        raise TrainError(f"{datasets[0].path}: vocabulary of {first.vocab_size} tokens, the model has "
                         f"{config.vocab_size} embeddings ({model_path})")
    for ds in datasets:
        if ds.manifest.max_seq_len > config.max_position_embeddings:
            raise TrainError(f"{ds.path}: sequences up to {ds.manifest.max_seq_len} tokens, the model "
                             f"has {config.max_position_embeddings} positions ({model_path})")


def check_data_and_objectives(datasets: list[PretrainDataset], config: TrainConfig) -> None:
    """Refuse objectives a dataset cannot feed: NSP on single-segment instances (no
    sentence pairs), MLM or TaCL on a dataset without static masks unless
    ``--dynamic-masking`` makes them."""
    objectives = config.objective.objectives
    for ds in datasets:
        kind = ds.manifest.instance_kind
        if "nsp" in objectives and kind != "pairs":
            raise TrainError(f"{ds.path}: {kind} instances have no sentence pairs for nsp: train it with "
                             "--objectives mirror (or mlm/tacl with --dynamic-masking), or build with pairs")
        needs_masks = [o for o in ("mlm", "tacl") if o in objectives]
        if needs_masks and not ds.manifest.static_masks and not config.data.dynamic_masking:
            raise TrainError(f"{ds.path}: built without static masks, which {','.join(needs_masks)} needs: add "
                             "--dynamic-masking")


def micro_batch_seed(seed: int, micro_batch: int) -> int:
    """The RNG seed of one micro-batch (its dropout masks), from the run's seed and
    the micro-batch's global index."""
    return int(np.random.SeedSequence([seed, micro_batch]).generate_state(1, dtype=np.uint64)[0] >> 1)


def build_optimizer(module: torch.nn.Module, config: TrainConfig, fused: bool) -> torch.optim.AdamW:
    """AdamW with weight decay on matrices only (not on biases or LayerNorm). The
    fused kernel is the same update rule with the same state (``exp_avg``,
    ``exp_avg_sq``, ``step``), so checkpoints move between the two."""
    decay, no_decay = [], []
    for name, param in module.named_parameters():
        if param.requires_grad:
            (no_decay if param.ndim < 2 or "LayerNorm" in name else decay).append(param)
    optim = config.optim
    groups = [{"params": decay, "weight_decay": optim.weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=optim.lr, betas=optim.betas, eps=optim.eps, fused=fused or None)


class StopRequest:
    """SIGUSR1 (Slurm's --signal before the time limit) or SIGTERM (preemption,
    scancel) asks for a checkpoint at the next step boundary and a clean exit; the
    job script then requeues the job, which resumes. Ranks agree with a MAX
    all-reduce, since the signal can reach them at different moments."""

    def __init__(self) -> None:
        self.signal_name: str | None = None
        for sig in (signal.SIGUSR1, signal.SIGTERM):
            signal.signal(sig, self._handle)

    def _handle(self, signum: int, _frame: Any) -> None:
        self.signal_name = signal.Signals(signum).name


@dataclass
class TrainState:
    """What a checkpoint's client state holds besides the engine."""

    step: int = 0  # optimizer updates applied
    consumed_samples: int = 0  # global position: samples of all ranks trained on (skipped steps included)
    skipped: int = 0  # updates skipped for non-finite gradients


@dataclass
class StepResult:
    applied: bool
    metrics: dict[str, float]  # the global batch's (losses averaged over ranks)
    tokens: int = 0  # real tokens this rank trained on
    flops: dict[str, float] = field(default_factory=dict)  # this rank's model FLOPs: student, teacher, total
    sample_digest: int = 0  # order-free fingerprint of the global batch's samples (same set, same digest)


class Trainer:
    """One TaCL run on this rank; see the module docstring."""

    def __init__(self, config: TrainConfig, dist: Distributed) -> None:
        self.config = config
        self.dist = dist
        self.device = dist.device
        self.run_dir = Path(config.output)
        if (self.run_dir / RUN_FILE).exists() and not config.checkpoint.resume:
            raise TrainError(f"{self.run_dir}: holds another run ({RUN_FILE}); pass --resume to continue it "
                             "or choose another --output")
        try:
            self.unpad, fused, warning = config.performance.resolve(
                self.device.type, config.data.pad_to_max_length,
                varlen_unsupported(self.device) if self.device.type == "cuda" else None)
        except ConfigError as err:
            raise TrainError(str(err)) from err
        if warning and dist.is_main:
            log.warning("%s", warning)

        self._build_models()
        self.tokenizer_dir = self._snapshot_run_inputs()
        self.ckpt_root = self.run_dir / "checkpoints"
        if dist.is_main:
            self.ckpt_root.mkdir(parents=True, exist_ok=True)
        resume_from = self._checkpoint_to_resume() if config.checkpoint.resume else None
        self._build_engine(fused, load_universal=bool(resume_from and resume_from.endswith(checkpoint.UNIVERSAL)))
        self._restore(resume_from)
        self._write_run_file(fused)
        dist.barrier()
        self.batches, self.eval_batches = self._build_data()
        self.metrics = MetricsLogger(self.run_dir, dist.is_main, config.optim.steps, config.log_every,
                                     self.state.step)
        self.stop_request = StopRequest()
        if dist.is_main:
            (self.run_dir / PREEMPTED_MARKER).unlink(missing_ok=True)
        self.peak = peak_flops(torch.cuda.get_device_name(self.device)) if self.device.type == "cuda" else None
        self.skipped_in_a_row = 0
        self.first_step = self.state.step

    # -- building -------------------------------------------------------------------------------------------

    def _build_models(self) -> None:
        """The datasets, the student and its frozen teacher on this rank's device."""
        config = self.config
        try:
            self.datasets = [PretrainDataset(path) for path in config.data.paths]
            torch.manual_seed(config.seed)  # a BertConfig init is the same on every rank and at resume
            self.student = load_student(config.model)
        except ValueError as err:  # DatasetError included: they name the path and the problem
            raise TrainError(str(err)) from err
        check_data_and_model(self.datasets, self.student, config.model)
        check_data_and_objectives(self.datasets, config)
        self.eval_every = self._resolve_eval_every()
        self.teacher = None
        if "tacl" in config.objective.objectives:
            dtype = config.performance.teacher_dtype or default_teacher_dtype(self.device)
            self.teacher = make_teacher(self.student, dtype, self.device)

    def _resolve_eval_every(self) -> int:
        """Evaluation runs on the validation split of the --data directories, never
        on training instances; without a split it is off, or refused if asked for."""
        asked = self.config.eval_every
        with_split = [d.path for d in self.datasets if d.manifest.has_validation]
        if asked is None:
            if not with_split and self.dist.is_main:
                log.info("no validation split in --data: held-out evaluation is off (build with "
                         "--validation-fraction to have one)")
            return 1000 if with_split else 0
        if asked > 0 and not with_split:
            raise TrainError(f"--eval-every {asked} needs a validation split, and {self.datasets[0].path} has "
                             "none: rebuild it with python -m data_prep.build ... --validation-fraction F "
                             "(e.g. 0.01), or pass --eval-every 0")
        return max(asked, 0)

    def _build_engine(self, fused: bool, load_universal: bool) -> None:
        """The DeepSpeed engine around the student with AdamW and the warm-up/decay schedule."""
        config = self.config
        # The other ranks' sequences are negatives of the mirror objective too.
        gather = self.dist.gather_rows if self.dist.world_size > 1 else None
        self.module = PretrainingModule(self.student, config.objective, gather)
        self.optimizer = build_optimizer(self.module, config, fused)
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(self.optimizer, config.optim.lr_factor)
        self.ds_config = deepspeed_config(config, self.dist.world_size, self.device.type, load_universal)
        if self.device.type == "cpu" and config.engine.precision == "fp16" and self.dist.is_main:
            log.warning("%s asks for fp16, which the CPU accelerator cannot do: training in fp32 instead",
                        config.engine.path)
        if self.unpad and self.device.type == "cuda" and self._precision() == "fp32" and self.dist.is_main:
            log.warning("unpadded batches in fp32 run attention sequence by sequence (FlashAttention needs "
                        "fp16/bf16): use a bf16/fp16 config or --no-unpad")
        import deepspeed

        try:
            self.engine, _, _, _ = deepspeed.initialize(model=self.module, optimizer=self.optimizer,
                                                        lr_scheduler=self.scheduler, config=self.ds_config)
        except ValueError as err:  # pydantic's ValidationError of a bad setting is one
            detail = " ".join(str(err).split())
            raise TrainError(f"{config.engine.path}: DeepSpeed refuses the config: {detail}") from err
        self.accumulation = int(self.ds_config["gradient_accumulation_steps"])
        if "mirror" in config.objective.objectives and self.accumulation > 1 and self.dist.is_main:
            optim = config.optim
            log.warning("mirror: %d accumulation steps, so its negatives come from %d sequences at a time, not "
                        "the global batch of %d; use --micro-batch-size %d on %d rank(s) for the whole batch",
                        self.accumulation, optim.micro_batch_size * self.dist.world_size, optim.batch_size,
                        optim.batch_size // self.dist.world_size, self.dist.world_size)

    def _restore(self, tag: str | None) -> None:
        """Load checkpoint ``tag`` (chosen by :meth:`_checkpoint_to_resume`):
        weights, optimizer, schedule and the global data position."""
        self.state = TrainState()
        self.saved_step = -1
        if tag is None:
            return
        client = checkpoint.load(self.engine, self.ckpt_root, tag)
        batch_size = self.config.optim.batch_size
        saved_batch = int(client.get("batch_size", batch_size))
        if saved_batch != batch_size:
            raise TrainError(f"{self.ckpt_root / tag} was trained with a global batch of {saved_batch}; "
                             f"--batch-size {batch_size} would change the data order and the schedule: resume "
                             f"with --batch-size {saved_batch} (ranks and micro-batch size may change)")
        if "consumed_samples" in client:
            consumed = int(client["consumed_samples"])
        else:  # saved before the global order: its position cannot be carried over exactly
            consumed = int(client["step"]) * batch_size
            log.warning("%s predates the global data order: continuing at sample %d of the new order",
                        self.ckpt_root / tag, consumed)
        self.state = TrainState(int(client["step"]), consumed, int(client.get("skipped", 0)))
        self.saved_step = self.state.step
        log.info("resumed from %s at step %d (%d samples consumed, %d ranks)", self.ckpt_root / tag,
                 self.state.step, consumed, self.dist.world_size)

    def _precision(self) -> str:
        if self.ds_config.get("fp16", {}).get("enabled"):
            return "fp16"
        return "bf16" if self.config.engine.precision == "bf16" else "fp32"

    def _snapshot_run_inputs(self) -> Path:
        """The run directory holds what an export needs: the tokenizer files, and a
        random init's weights as ``RUN_DIR/initial`` (the reference for analyses)."""
        tokenizer_dir = self.run_dir / "tokenizer"
        if self.dist.is_main:
            self.run_dir.mkdir(parents=True, exist_ok=True)
            source = tokenizer_source(self.config.model, self.datasets[0])
            tokenizer_dir = snapshot_tokenizer(source, self.run_dir)
            if Path(self.config.model).is_file() and not (self.run_dir / "initial").exists():
                export_student(self.student, self.run_dir / "initial", tokenizer_dir)
        return tokenizer_dir

    def _checkpoint_to_resume(self) -> str | None:
        """Rank 0 picks the newest checkpoint whose files verify (warning about
        newer ones that do not); when it was saved at another number of ranks, its
        DeepSpeed universal conversion (made here once). Every rank gets the tag."""
        choice: tuple[str | None, list[str], str | None] = (None, [], None)
        if self.dist.is_main:
            tag, problems = checkpoint.newest_verified_tag(self.ckpt_root)
            error = None
            if tag is not None:
                saved = checkpoint.saved_world_size(self.ckpt_root / tag)
                if saved != self.dist.world_size:
                    log.info("%s was saved by %d rank(s), this job has %d: converting it to a DeepSpeed universal "
                             "checkpoint", self.ckpt_root / tag, saved, self.dist.world_size)
                    try:
                        tag = checkpoint.universal_copy(self.ckpt_root, tag, self.run_dir / "universal-conversion.log")
                    except RuntimeError as err:
                        error = str(err)
            choice = (tag, problems, error)
        tag, problems, error = self.dist.broadcast_object(choice)
        if error is not None:
            raise TrainError(error)
        for problem in problems if self.dist.is_main else []:
            log.warning("skipping a checkpoint that does not verify: %s", problem)
        if tag is None and problems:
            raise TrainError(f"--resume: no checkpoint under {self.ckpt_root} verifies; the newest fails with "
                             f"{problems[0]}")
        if tag is not None and problems and self.dist.is_main:
            log.warning("resuming from the older checkpoint %s", self.ckpt_root / tag)
        return tag

    def _write_run_file(self, fused: bool) -> None:
        if not self.dist.is_main:
            return
        info = {
            "config": self.config.to_dict(),
            "world_size": self.dist.world_size,
            "device": str(self.device.type),
            "unpad": self.unpad,
            "fused_optimizer": fused,
            "student_config": student_config_dict(self.student),
            "tokenizer_source": tokenizer_source(self.config.model, self.datasets[0]),
            "deepspeed_config": self.ds_config,
        }
        tmp = self.run_dir / f".{RUN_FILE}.tmp"
        tmp.write_text(json.dumps(info, indent=2), encoding="utf-8")
        tmp.replace(self.run_dir / RUN_FILE)

    def _build_data(self) -> tuple[Iterator[dict[str, Any]], list[dict[str, Any]]]:
        """This rank's micro-batches of the global order from the saved position,
        and (rank 0) the validation batches, padded, on the device."""
        config, optim = self.config, self.config.optim
        data = BlendedDatasets(self.datasets, config.data.weights, config.seed)
        order = GlobalOrder(len(data), config.seed)
        layout = BatchLayout(optim.batch_size, optim.micro_batch_size, self.dist.world_size, self.dist.rank)
        masking = None
        if config.data.dynamic_masking:
            try:
                masking = [DynamicMasking.for_dataset(d, config.seed) for d in self.datasets]
            except ValueError as err:  # DatasetError: names the dataset and the fix
                raise TrainError(str(err)) from err
        views = None
        if "mirror" in config.objective.objectives:  # the datasets share one tokenizer (checked)
            views = MirrorViews.for_manifest(self.datasets[0].manifest, config.seed,
                                             config.objective.mirror.span_tokens)
        max_len = max(d.manifest.max_seq_len for d in self.datasets)
        padded = CollateConfig(pad_id=self.datasets[0].manifest.tokenizer.special_ids.pad,
                               pad_to_multiple_of=config.data.pad_to_multiple_of,
                               pad_to_length=max_len if config.data.pad_to_max_length else None)
        train_collate = CollateConfig(padded.pad_id, padded.pad_to_multiple_of, padded.pad_to_length, self.unpad)
        loader = torch.utils.data.DataLoader(
            TrainingInstances(data, masking, views),
            batch_sampler=MicroBatchSampler(order, layout, self.state.consumed_samples),
            collate_fn=partial(collate, config=train_collate),
            num_workers=config.data.num_workers,
            pin_memory=self.device.type == "cuda",
            # Its own generator: starting an iterator must not draw from the global RNG,
            # or a resumed run's dropout would differ from an uninterrupted one's.
            generator=torch.Generator().manual_seed(config.seed),
        )
        eval_batches: list[dict[str, Any]] = []
        if self.eval_every and self.dist.is_main:
            validation = BlendedDatasets(
                [PretrainDataset(d.path, split="validation") for d in self.datasets if d.manifest.has_validation])
            count = min(config.eval_instances, len(validation))
            chosen = np.unique(np.linspace(0, len(validation) - 1, count).round().astype(np.int64)).tolist()
            held_out = TrainingInstances(validation, views=views)
            eval_batches = [self.dist.move(collate([held_out[(0, k)] for k in chosen[i : i + optim.micro_batch_size]],
                                                   padded))
                            for i in range(0, len(chosen), optim.micro_batch_size)]
        return iter(loader), eval_batches

    # -- running --------------------------------------------------------------------------------------------

    @property
    def last_step(self) -> int:
        """The step this job ends at (``--stop-after-steps`` may end it early)."""
        last = self.config.optim.steps
        if self.config.checkpoint.stop_after_steps is not None:
            last = min(last, self.first_step + self.config.checkpoint.stop_after_steps)
        return last

    def train(self) -> list[dict[str, float]]:
        """Run to ``--steps`` applied updates (or this job's end); export the
        student when the run is complete. Returns rank 0's per-step metrics."""
        self.engine.train()
        preempted = False
        while self.state.step < self.last_step:
            result = self.train_step()
            if result.applied:
                self.metrics.log_step(self.state.step, result.metrics, {"sample_digest": result.sample_digest})
                self.maybe_evaluate()
                self.maybe_checkpoint()
            else:
                self.metrics.log_skipped(self.state.step, self.state.skipped, result.metrics.get("loss_scale"))
            if self.preemption_requested():
                preempted = True
                break
        if self.state.step == self.config.optim.steps and not preempted and self.config.export:
            self.export()
        self.dist.barrier()
        return self.metrics.history

    def train_step(self) -> StepResult:
        """One optimizer step: ``accumulation`` micro-batches through teacher and
        student, backward, and the engine's update at the boundary (which DeepSpeed
        may skip). Metrics are the global batch's: losses averaged, tokens summed
        over ranks, in one collective."""
        started = time.monotonic()
        lr = float(self.scheduler.get_last_lr()[0])  # the lr this update applies
        sums: torch.Tensor | None = None
        keys: list[str] = []
        lengths: list[int] = []
        masked_tokens = digest = 0
        for _ in range(self.accumulation):
            cpu_batch = next(self.batches)
            lengths += sequence_lengths(cpu_batch).tolist()
            masked_tokens += int(cpu_batch["masked"].sum())
            digest += sample_digest(cpu_batch["sample_keys"].numpy())
            # Dropout keyed by the micro-batch's global position: the same on any rank count.
            torch.manual_seed(micro_batch_seed(self.config.seed, cpu_batch["micro_batch"]))
            batch = self.dist.move(cpu_batch)
            hidden = teacher_states(self.teacher, batch) if self.teacher is not None else None
            parts = self.engine(batch, hidden)
            self.engine.backward(parts["loss"])
            self.engine.step()
            keys = sorted(parts)
            values = torch.stack([parts[k].detach().float() for k in keys])
            sums = values if sums is None else sums + values
        assert sums is not None
        self.state.consumed_samples += self.config.optim.batch_size
        applied = bool(self.engine.was_step_applied())
        if applied:
            self.state.step += 1
            self.skipped_in_a_row = 0
        else:
            self.state.skipped += 1
            self.skipped_in_a_row += 1
            if self.skipped_in_a_row >= self.config.optim.max_skipped_in_a_row:
                raise TrainError(f"{self.skipped_in_a_row} updates in a row skipped for non-finite gradients "
                                 f"after step {self.state.step}: the run has diverged")
        totals = self.dist.sum(torch.cat([sums / self.accumulation, sums.new_tensor([len(lengths)]),
                                          sums.new_tensor([sum(lengths)])])).tolist()
        step_digest = self.dist.sum_exact(digest % DIGEST_MODULUS) % DIGEST_MODULUS
        world = self.dist.world_size
        metrics = {k: v / world for k, v in zip(keys, totals[: len(keys)], strict=True)}
        elapsed = time.monotonic() - started
        metrics["lr"] = lr
        metrics["samples_per_s"] = totals[-2] / elapsed
        metrics["tokens_per_s"] = totals[-1] / elapsed
        metrics["skipped_steps"] = float(self.state.skipped)
        grad_norm = self.engine.get_global_grad_norm()
        if grad_norm is not None and applied:
            metrics["grad_norm"] = float(grad_norm)
        if self._precision() == "fp16":
            metrics["loss_scale"] = float(getattr(self.engine.optimizer, "cur_scale", 0.0))
        flops = step_flops(self.student.config, lengths, masked_tokens, self.config.objective.objectives)
        if self.peak is not None:  # GPUs only: model FLOPs utilisation of this rank's step
            metrics["mfu"] = mfu(flops["total"], elapsed, self.peak)
        return StepResult(applied, metrics, sum(lengths), flops, step_digest)

    def maybe_evaluate(self) -> None:
        """Every ``--eval-every`` steps (and at the last): the validation split's
        losses and the student's per-layer self-similarity; the initial model's once
        per job."""
        config, step = self.config, self.state.step
        if self.eval_every <= 0 or not (step % self.eval_every == 0 or step == config.optim.steps):
            return
        if self.dist.is_main and self.eval_batches:
            if self.teacher is not None and step - self.first_step <= self.eval_every:
                # The initial model (= the teacher) as the reference line.
                initial = layer_self_similarity(self.teacher, self.eval_batches)
                self.metrics.log_scalars("eval_initial", step,
                                         {f"selfsim_layer{k}": v for k, v in enumerate(initial)})
            self.metrics.log_scalars("eval", step, evaluate(self.engine.module.student, self.teacher,
                                                             self.eval_batches, config.objective))
        self.dist.barrier()

    def maybe_checkpoint(self, force: bool = False) -> None:
        step = self.state.step
        due = step % self.config.checkpoint.save_every == 0 or step == self.last_step
        if (due or force) and step != self.saved_step:
            client = {"step": step, "consumed_samples": self.state.consumed_samples, "skipped": self.state.skipped,
                      "batch_size": self.config.optim.batch_size}
            checkpoint.save(self.engine, self.ckpt_root, step, client, self.config.checkpoint.keep_last,
                            self.dist.barrier)
            self.saved_step = step

    def preemption_requested(self) -> bool:
        """Whether any rank got SIGUSR1/SIGTERM; if so, checkpoint this step and
        leave the PREEMPTED marker the Slurm job requeues on."""
        if not self.dist.any(self.stop_request.signal_name is not None):
            return False
        if self.state.step >= self.config.optim.steps:
            return False  # finished anyway
        self.maybe_checkpoint(force=True)
        if self.dist.is_main:
            name = self.stop_request.signal_name or "signal on another rank"
            (self.run_dir / PREEMPTED_MARKER).write_text(f"{name} at step {self.state.step}\n")
            print(f"{name}: checkpointed step {self.state.step}, exiting for a requeue", flush=True)
        return True

    def export(self) -> None:
        """Rank 0 writes ``RUN_DIR/export`` from the final checkpoint's fp32 master weights."""
        self.maybe_checkpoint(force=True)
        if self.dist.is_main:
            out = export_checkpoint(self.ckpt_root / checkpoint.tag_for(self.state.step), self.run_dir / "export")
            print(f"exported the student to {out}", flush=True)

    def close(self) -> None:
        """Stop the data-loader workers, close the metrics, release the engine and
        leave the process group. Without ``engine.destroy()`` ZeRO's gradient hooks
        keep the engine, its model and its optimizer state alive for as long as
        the process runs (several Trainers in one process would add up)."""
        self.batches = iter(())  # dropping the loader's iterator shuts its worker processes down
        self.metrics.close()
        self.engine.destroy()
        self.dist.close()
