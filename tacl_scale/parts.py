"""The parts of a training run, and :func:`build_run`, which builds them once, in
the order they depend on one another, into one :class:`RunParts`:

1. the settings the device allows (unpadded batches, fused AdamW, precision);
2. the datasets, checked against the model and the objectives (:mod:`tacl_scale.input_checks`);
3. the student and its frozen teacher;
4. the run directory's inputs (the tokenizer, a random init's weights);
5. the checkpoint to resume from, if any (:mod:`tacl_scale.resume`);
6. the DeepSpeed engine (student, AdamW, schedule);
7. the restored state (weights, optimizer, data position; :mod:`tacl_scale.resume`);
8. ``run.json``;
9. the data: this rank's micro-batches from the saved position, the validation batches;
10. the metrics logger.

Every step is a function of what the steps before it returned; nothing here is
half-built. :class:`~tacl_scale.trainer.Trainer` runs what this returns.
"""

from __future__ import annotations

import logging
import shutil
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np
import torch

from . import checkpoint
from .attention import varlen_unsupported
from .config import EVAL_EVERY_WITH_SPLIT, ConfigError, ResolvedPerformance, TrainConfig
from .data import PretrainDataset
from .data.blend import BlendedDatasets
from .data.buckets import TokenBuckets
from .data.integrity import (
    VERIFY_BY_DEFAULT_BYTES,
    all_shards,
    shard_bytes,
    unchecked_files,
    verify_shards,
    verify_tokenizer,
)
from .data.loader import (
    CollateConfig,
    DynamicMasking,
    MicroBatchSampler,
    TrainingInstances,
    checked_batches,
    collate,
)
from .data.manifest import NO_VOCABULARY, DatasetError, holds_a_vocabulary
from .data.shuffle import GlobalOrder
from .data.views import MirrorViews
from .distributed import Distributed
from .encoder import CompiledEncoder, expect_cuda_graphs
from .engine_config import batch_layout, deepspeed_config, settings_deepspeed_ignores
from .errors import TrainError
from .export import export_student, not_exported
from .flops import peak_flops
from .input_checks import check_data_and_model, check_data_and_objectives
from .kernels.tacl_loss import impl_unavailable
from .locking import DirectoryLock, LockedError, holder
from .markers import EXPORT_MARKER
from .metrics import MetricsLogger
from .model import PretrainingModule, default_teacher_dtype, make_teacher
from .preemption import ignore_in_worker
from .pretrained import config_beside_weights_problem, load_student_and_new_weights, new_weights_line
from .resume import TrainState, apply_optimizer_settings, check_steps_left, checkpoint_to_resume, restore
from .resume_checks import check_data_unchanged, check_resume_settings, check_student_config
from .run_dir import (
    RUN_FILE,
    JobSegment,
    RunDir,
    RunRecord,
    missing_input,
    output_problem,
    record_job,
    student_config_dict,
)
from .run_tokenizer import snapshot_tokenizer, tokenizer_source

if TYPE_CHECKING:
    from deepspeed import DeepSpeedEngine
    from transformers import BertForPreTraining, BertModel

# The Trainer's logger, not this module's: tests and users filter the run's build and training on one name.
log = logging.getLogger("tacl_scale.trainer")
T = TypeVar("T")


def resolve_precision(config: TrainConfig, device: torch.device) -> str:
    """The student's precision on ``device``: ``--precision`` or the config's, with
    ``auto`` settled by whether the GPU has bf16."""
    supported = device.type == "cuda" and torch.cuda.is_bf16_supported()
    return config.engine.precision_on(device.type, supported, config.performance.precision)


def resolve_micro_batch(config: TrainConfig, dist: Distributed, datasets: list[PretrainDataset],
                        student: BertForPreTraining, teacher: BertModel | None,
                        precision: str) -> TrainConfig:
    """``config`` with its micro-batch settled: as asked, or (``"auto"``) the largest
    divisor of the per-rank batch that fits the device at the datasets' longest
    sequence (:func:`tacl_scale.memory.auto_micro_batch`), said in the log."""
    optim = config.optim
    if optim.micro_batch_size is not None:
        return config
    from dataclasses import replace

    from .memory import Workload, auto_micro_batch, training_bytes

    per_rank = batch_layout(config, dist.world_size).per_rank
    max_len = max(d.manifest.max_seq_len for d in datasets)
    device_bytes = torch.cuda.mem_get_info(dist.device)[1] if dist.device.type == "cuda" else None
    workload = Workload.of(config.objective.objectives, None if teacher is None else teacher.dtype, precision)
    # Rank 0's choice for all: every rank must agree on the batch shape.
    micro = dist.broadcast_object(auto_micro_batch(student.config, per_rank, max_len, workload, device_bytes))
    if dist.is_main:
        where = ("on the CPU" if device_bytes is None else
                 f"estimated {training_bytes(student.config, micro, max_len, workload) / 2**30:.1f} of "
                 f"{device_bytes / 2**30:.1f} GiB at length {max_len}")
        log.info("micro-batch auto: %d of the per-rank batch of %d (%s; --micro-batch-size to choose)", micro,
                 per_rank, where)
    return replace(config, optim=replace(optim, micro_batch_size=micro))


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


@dataclass
class EngineParts:
    """The DeepSpeed engine and what it was built from."""

    module: PretrainingModule  # the student with its objective
    optimizer: torch.optim.AdamW
    scheduler: torch.optim.lr_scheduler.LambdaLR
    engine: DeepSpeedEngine
    ds_config: dict[str, Any]  # the DeepSpeed JSON as resolved for this job
    accumulation: int  # micro-batches per optimizer step on each rank


@dataclass
class RunParts:
    """Everything a run is made of (see the module docstring)."""

    datasets: list[PretrainDataset]
    eval_every: int  # 0: no evaluation
    student: BertForPreTraining
    teacher: BertModel | None  # None without the tacl objective
    engine: EngineParts
    state: TrainState
    resumed_step: int  # the step of the checkpoint this job resumed from (-1: a new run)
    batches: Iterator[dict[str, Any]]  # this rank's micro-batches, from the saved position
    eval_batches: list[dict[str, Any]]  # rank 0: the validation batches, on the device
    metrics: MetricsLogger
    performance: ResolvedPerformance
    precision: str  # fp16, bf16 or fp32: what the student trains in on this device
    peak_flops: float | None  # the GPU's datasheet peak (None off CUDA or for an unknown GPU)
    lock: DirectoryLock | None  # rank 0: the run directory's, held until the Trainer closes
    teacher_fast: CompiledEncoder | None  # the teacher's encoder compiled (--compile)
    config: TrainConfig  # the run's settings with what the device decided (the micro-batch)


def build_run(config: TrainConfig, dist: Distributed) -> RunParts:
    """Build a run's parts in dependency order (see the module docstring)."""
    run = RunDir(config.output)
    if problem := output_problem(run.path, config.data.paths, config.model):
        raise TrainError(problem)
    if run.has_record() and not config.checkpoint.resume:
        # Said first (with --resume the lock would refuse it); asked on rank 0 alone: a probe
        # takes the lock for an instant, so the ranks' probes saw each other's as a holder.
        if (held := on_main(dist, lambda: holder(run.path))) is not None:
            raise TrainError(f"{run.path}: holds a run in use by {held}; wait for it to end (or stop it), then "
                             "pass --resume to continue it, or choose another --output")
        raise TrainError(f"{run.path}: holds another run ({RUN_FILE}); pass --resume to continue it "
                         "or choose another --output")
    precision = resolve_precision(config, dist.device)
    # Its refusals come before anything is written; the engine's own is settled again with the micro-batch.
    ds = deepspeed_config(config, dist.world_size, dist.device.type, precision=precision)
    if dist.is_main:
        for problem in [*settings_deepspeed_ignores(ds, config.engine.path), *config.settings_without_effect()]:
            log.warning(problem)
    if problem := missing_input(config):  # after the refusals of the flags themselves, as the Slurm job's check
        raise TrainError(problem)
    lock = on_main(dist, lambda: DirectoryLock(run.path, "training").acquire())
    try:
        # run.json, read once under the lock (rank 0): nothing else writes it until this job records itself.
        record = on_main(dist, lambda: run.read_record() if run.has_record() else None)
        changes: list[str] = []  # of the run's settings, taken with --allow-changes: recorded in its history

        def resume_check(check: Callable[[], list[str]]) -> None:
            if config.checkpoint.resume:  # rank 0 has the record; every rank raises its refusal
                changes.extend(on_main(dist, check) or [])

        resume_check(lambda: check_resume_settings(run, record, config))
        performance = resolve_performance(config, dist, precision)
        datasets = open_datasets(config, dist)
        fingerprints = [dataset.manifest.content_fingerprint() for dataset in datasets]
        resume_check(lambda: check_data_unchanged(run, record, config, fingerprints))
        student, teacher, new_weights = build_models(config, datasets, dist, new_run=record is None)
        # Before a checkpoint of the run's shape is loaded into it.
        resume_check(lambda: check_student_config(run, record, student_config_dict(student), config))
        config = resolve_micro_batch(config, dist, datasets, student, teacher, precision)
        student_fast, teacher_fast = compiled_encoders(config, performance, datasets, student, teacher)
        eval_every = resolve_eval_every(config, datasets, dist.is_main)
        on_main(dist, lambda: snapshot_inputs(run, config, datasets[0], student, new_run=record is None))
        resume_from = checkpoint_to_resume(run, dist) if config.checkpoint.resume else None
        say_new_weights(config.model, new_weights, resume_from, dist.is_main)
        engine = build_engine(config, student, dist, performance, precision,
                              load_universal=bool(resume_from and resume_from.endswith(checkpoint.UNIVERSAL)),
                              fast=student_fast)
        state = restore(engine.engine, run.checkpoints, resume_from, config, dist.world_size)
        if resume_from is not None:
            check_steps_left(run.checkpoints / resume_from, state.step, config.optim.steps, dist.is_main)
            apply_optimizer_settings(engine, config.optim, state.step)
        on_main(dist, lambda: record_this_job(run, record, config, dist, datasets[0], student, performance,
                                              engine.ds_config, state.step, changes, fingerprints))
        batches, eval_batches = build_data(config, datasets, dist, state, performance.unpad, eval_every)
        metrics = MetricsLogger(run, dist.is_main, config.optim.steps, config.log_every, state.step,
                                config.job_end(state.step))
    except BaseException:
        if lock is not None:
            lock.release()
        raise
    peak = peak_flops(torch.cuda.get_device_name(dist.device)) if dist.device.type == "cuda" else None
    return RunParts(datasets, eval_every, student, teacher, engine, state, state.step if resume_from else -1,
                    batches, eval_batches, metrics, performance, precision, peak, lock, teacher_fast, config)


def on_main(dist: Distributed, step: Callable[[], T]) -> T | None:
    """Run ``step`` on rank 0 only (what writes the run directory); when it fails
    there, every rank raises its one-line :class:`TrainError` instead of waiting in
    the next collective. Returns rank 0's result (None on the other ranks)."""
    result, error = None, None
    if dist.is_main:
        try:
            result = step()
        except (TrainError, ValueError, OSError, LockedError) as err:
            error = str(err)
    error = dist.broadcast_object(error)
    if error is not None:
        raise TrainError(error)
    return result


def resolve_teacher_dtype(config: TrainConfig, device: torch.device) -> str | None:
    """The teacher's precision on ``device``: ``--teacher-dtype``, else fp16 on CUDA
    and fp32 on the CPU; ``None`` without the tacl objective (no teacher)."""
    if "tacl" not in config.objective.objectives:
        return None
    return config.performance.teacher_dtype or default_teacher_dtype(device)


def resolve_performance(config: TrainConfig, dist: Distributed, precision: str) -> ResolvedPerformance:
    """Unpadded batches, the compiled encoder and the fused optimizer on this device
    training in ``precision`` (:meth:`PerformanceConfig.resolve`: unpadded needs
    FlashAttention-2 on CUDA, and a compiled encoder its half precision; what is not
    used is said once)."""
    device = dist.device
    try:
        resolved = config.performance.resolve(device.type, config.data.pad_to_max_length,
                                              varlen_unsupported(device) if device.type == "cuda" else None,
                                              precision, resolve_teacher_dtype(config, device))
    except ConfigError as err:
        raise TrainError(str(err)) from err
    if resolved.warning and dist.is_main:
        log.warning("%s", resolved.warning)
    if "tacl" in config.objective.objectives and (
            problem := impl_unavailable(config.objective.tacl_impl, device.type)):
        raise TrainError(f"--tacl-impl {config.objective.tacl_impl} {problem}: leave it at auto")
    if config.performance.cuda_graphs and device.type != "cuda" and dist.is_main:
        log.warning("--cuda-graphs replays CUDA graphs: on the %s it changes nothing", device.type.upper())
    return resolved


def open_datasets(config: TrainConfig, dist: Distributed) -> list[PretrainDataset]:
    """The ``--data`` directories, verified (:func:`verify_datasets`), refused if a
    dataset cannot feed the objectives."""
    try:
        datasets = [PretrainDataset(path) for path in config.data.paths]
    except ValueError as err:  # DatasetError: names the path and the problem
        raise TrainError(str(err)) from err
    verify_datasets(datasets, config.data.verify, dist)
    check_data_and_objectives(datasets, config)
    return datasets


def verify_datasets(datasets: list[PretrainDataset], verify: bool | None, dist: Distributed) -> None:
    """Check each dataset's tokenizer copy against its manifest, always (the ids
    in the shards mean that vocabulary, and the export ships it); and, when
    ``verify`` (None: for datasets up to ``VERIFY_BY_DEFAULT_BYTES``), every shard
    file's checksum, each rank reading its share. A bad file is a
    :class:`TrainError` naming it, on every rank."""
    problems = [problem for ds in datasets for problem in verify_tokenizer(ds.path, ds.manifest)]
    _refuse_bad_files(problems)  # the same on every rank
    total = sum(shard_bytes(ds.manifest) for ds in datasets)
    if verify is None:
        verify = total <= VERIFY_BY_DEFAULT_BYTES
        if not verify and dist.is_main:
            log.info("--data holds %.1f GB: its shards are not verified by default (--verify-data to check them; "
                     "python -m data_prep.inspect DIR --verify checks a dataset on its own)", total / 1e9)
    if not verify:
        return
    started = time.monotonic()
    shards = [(ds, shard) for ds in datasets for shard in all_shards(ds.manifest)]
    mine = [problem for ds, shard in shards[dist.rank :: dist.world_size]
            for problem in verify_shards(ds.path, ds.manifest, [shard])]
    _refuse_bad_files([problem for rank in dist.gather_objects(mine) for problem in rank])
    if dist.is_main:
        unchecked = sum(unchecked_files(ds.manifest) for ds in datasets)
        log.info("verified the %d shard(s) of --data (%.2f GB) in %.1f s%s", len(shards), total / 1e9,
                 time.monotonic() - started,
                 f"; {unchecked} file(s) by size only (built before checksums: rebuild to verify them)"
                 if unchecked else "")


def _refuse_bad_files(problems: list[str]) -> None:
    if problems:
        more = (f" (and {len(problems) - 1} more bad file(s): python -m data_prep.inspect DIR --verify lists them)"
                if len(problems) > 1 else "")
        raise TrainError(problems[0] + more)


def build_models(config: TrainConfig, datasets: list[PretrainDataset], dist: Distributed,
                 new_run: bool) -> tuple[BertForPreTraining, BertModel | None, list[str]]:
    """The student (checked against the datasets' tokenizer and lengths), its
    frozen teacher on the device (None without the tacl objective), and the names of
    the student's weights its checkpoint lacked (initialised at random: said by
    :func:`say_new_weights` once a resume has settled whether they stay). What the
    check has to say (a model folder without a tokenizer takes the dataset's) is said
    by rank 0 of a ``new_run``: a resumed run took it already, at its first job."""
    if not config.checkpoint.resume and (problem := config_beside_weights_problem(config.model)):
        raise TrainError(problem)
    try:
        torch.manual_seed(config.seed)  # a BertConfig init is the same on every rank and at resume
        student, new_weights = load_student_and_new_weights(config.model)
    except ValueError as err:
        raise TrainError(str(err)) from err
    for note in check_data_and_model(datasets, student, config.model):
        if dist.is_main and new_run:  # every rank checks (each refuses alike); one says it
            log.warning("%s", note)
    dtype = resolve_teacher_dtype(config, dist.device)
    return student, None if dtype is None else make_teacher(student, dtype, dist.device), new_weights


def say_new_weights(model: str, new_weights: list[str], resumed_from: str | None, is_main: bool) -> None:
    """Say once (rank 0) which parts of the student start at random (a sentence
    encoder's MLM and NSP heads): its MLM loss starts above ln(vocabulary) and its
    mlm_acc near 0, which a reader of the metrics should not take for a broken run.
    Nothing when a checkpoint was loaded: the heads then come from it, trained."""
    if is_main and resumed_from is None and (line := new_weights_line(model, new_weights)):
        log.warning("%s", line)


def compiled_encoders(config: TrainConfig, performance: ResolvedPerformance, datasets: list[PretrainDataset],
                      student: BertForPreTraining,
                      teacher: BertModel | None) -> tuple[CompiledEncoder | None, CompiledEncoder | None]:
    """The student's and the teacher's encoders under ``torch.compile`` (``--compile``),
    packed micro-batches rounded up to token buckets of the micro-batch size at the
    datasets' longest sequence; ``(None, None)`` without it. With ``--cuda-graphs``
    inductor is told how many graphs (shapes) to expect of each."""
    if not performance.compile:
        return None, None
    max_len = max(d.manifest.max_seq_len for d in datasets)
    buckets = TokenBuckets.for_batches(config.optim.micro_batch_size, max_len) if performance.unpad else None
    graphs = config.performance.cuda_graphs
    if graphs:  # a packed batch's shape is its bucket; a padded one's, its longest sequence
        views = 2 if "mirror" in config.objective.objectives else 1
        expect_cuda_graphs(len(buckets.sizes(views * buckets.capacity)) if buckets is not None else max_len)
    return (CompiledEncoder(student.bert, buckets, graphs),
            CompiledEncoder(teacher, buckets, graphs) if teacher is not None else None)


def resolve_eval_every(config: TrainConfig, datasets: list[PretrainDataset], is_main: bool) -> int:
    """Evaluation runs on the validation split of the --data directories, never
    on training instances; without a split it is off, or refused if asked for."""
    asked = config.eval_every
    with_split = [d.path for d in datasets if d.manifest.has_validation]
    empty = [d for d in datasets if d.manifest.validation is not None and not d.manifest.has_validation]
    if asked and asked > 0 and not with_split and empty:
        split = empty[0].manifest.validation
        raise TrainError(f"--eval-every {asked}: {empty[0].path} was built with --validation-fraction "
                         f"{split.fraction}, but none of its {empty[0].manifest.train.totals.documents} documents "
                         "fell into the validation split (too few for that fraction): rebuild it with a larger "
                         "--validation-fraction or more input, or pass --eval-every 0")
    if asked is None:
        if not with_split and is_main:
            log.info("no validation split in --data: held-out evaluation is off (build with "
                     "--validation-fraction to have one)")
        return EVAL_EVERY_WITH_SPLIT if with_split else 0
    if asked > 0 and not with_split:
        raise TrainError(f"--eval-every {asked} needs a validation split, and {datasets[0].path} has "
                         "none: rebuild it with python -m data_prep.build ... --validation-fraction F "
                         "(e.g. 0.01), or pass --eval-every 0")
    return max(asked, 0)


def build_engine(config: TrainConfig, student: BertForPreTraining, dist: Distributed,
                 performance: ResolvedPerformance, precision: str, load_universal: bool,
                 fast: CompiledEncoder | None = None) -> EngineParts:
    """The DeepSpeed engine around the student (``fast``: its encoder compiled) with
    AdamW and the warm-up/decay schedule."""
    device = dist.device
    # The other ranks' sequences are negatives of the mirror objective too.
    gather = dist.gather_rows if dist.world_size > 1 else None
    module = PretrainingModule(student, config.objective, gather, fast)
    optimizer = build_optimizer(module, config, performance.fused_optimizer)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, config.optim.lr_factor)
    ds_config = deepspeed_config(config, dist.world_size, device.type, load_universal, precision)
    asked = config.performance.precision or config.engine.precision
    if dist.is_main and precision != asked and asked != "auto":
        source = "--precision" if config.performance.precision else config.engine.path
        log.warning("%s asks for %s, which the %s accelerator cannot do: training in %s instead",
                    source, asked, device.type.upper(), precision)
    in_fp32 = {who: fix for who, dtype, fix in (("the student", precision, "a bf16/fp16 config"),
                                                 ("the teacher", resolve_teacher_dtype(config, device),
                                                  "--teacher-dtype fp16 or bf16")) if dtype == "fp32"}
    if performance.unpad and device.type == "cuda" and in_fp32 and dist.is_main:
        log.warning("unpadded batches in fp32 (%s) run attention sequence by sequence (FlashAttention needs "
                    "fp16/bf16): use %s, or --no-unpad", " and ".join(in_fp32), " and ".join(in_fp32.values()))
    import deepspeed

    try:
        engine, _, _, _ = deepspeed.initialize(model=module, optimizer=optimizer, lr_scheduler=scheduler,
                                               config=ds_config)
    except ValueError as err:  # pydantic's ValidationError of a bad setting is one
        detail = " ".join(str(err).split())
        raise TrainError(f"{config.engine.path}: DeepSpeed refuses the config: {detail}") from err
    accumulation = batch_layout(config, dist.world_size).accumulation
    if "mirror" in config.objective.objectives and accumulation > 1 and dist.is_main:
        optim = config.optim
        log.warning("mirror: %d accumulation steps, so its negatives come from %d sequences at a time, not "
                    "the global batch of %d; use --micro-batch-size %d on %d rank(s) for the whole batch",
                    accumulation, optim.micro_batch_size * dist.world_size, optim.batch_size,
                    optim.batch_size // dist.world_size, dist.world_size)
    return EngineParts(module, optimizer, scheduler, engine, ds_config, accumulation)


def record_this_job(run: RunDir, record: RunRecord | None, config: TrainConfig, dist: Distributed,
                    dataset: PretrainDataset, student: BertForPreTraining, performance: ResolvedPerformance,
                    ds_config: dict[str, Any], step: int, changes: list[str], fingerprints: list[str]) -> RunRecord:
    """``run.json`` (``record``, None for a new run) with this job in its
    ``history`` (the step it started at, its ranks and device, the settings it
    changed with ``--allow-changes``); a new run's record holds its settings as
    this job resolved them."""
    device = str(dist.device.type)
    segment = JobSegment(step, dist.world_size, device, performance.unpad, performance.compile, changes)
    new = RunRecord(config=config.to_dict(), world_size=dist.world_size, device=device, unpad=performance.unpad,
                    fused_optimizer=performance.fused_optimizer,
                    tokenizer_source=tokenizer_source(config.model, dataset), deepspeed_config=ds_config,
                    student_config=student_config_dict(student), data_fingerprints=fingerprints)
    return record_job(run, record, segment, new, config)


def snapshot_inputs(run: RunDir, config: TrainConfig, dataset: PretrainDataset,
                    student: BertForPreTraining, new_run: bool) -> None:
    """What an export needs, in the run directory from the first job on: the
    tokenizer files, and a random init's weights as ``RUN_DIR/initial`` (the
    reference line of analyses). Also makes ``RUN_DIR/checkpoints``. A ``new_run``
    (nothing recorded in ``run.json``) may find them from a first job that stopped
    before recording itself, maybe under another ``--model`` (its tokenizer was
    exported with this run's weights): its random init replaces that job's
    ``initial`` export; a tokenizer folder is kept only where it is this run's
    (:func:`~tacl_scale.run_tokenizer.snapshot_tokenizer`); what no run wrote is refused."""
    run.checkpoints.mkdir(parents=True, exist_ok=True)
    tokenizer_dir = snapshot_tokenizer(tokenizer_source(config.model, dataset), run, new_run,
                                       data_ids=dataset.manifest.tokenizer.vocab_size)
    if not holds_a_vocabulary(tokenizer_dir):  # before the first step, not at the export after the last
        raise ValueError(f"{tokenizer_dir}: {NO_VOCABULARY}, copied from the model or the dataset: the run could not "
                         "be exported; give a --model or a dataset whose tokenizer has one")
    random_init = Path(config.model).is_file()
    if new_run and (run.initial.exists() or run.initial.is_symlink()):
        # A first job's export of its random init, holding nothing else, is replaced (or, for a
        # pretrained --model, which has none, removed); anything else there is not this run's to delete.
        if not (run.initial.is_dir() and not run.initial.is_symlink() and (run.initial / EXPORT_MARKER).is_file()):
            problem = f"not a run's initial weights (no {EXPORT_MARKER})"
        elif stray := not_exported(run.initial):
            problem = f"holds {stray}, which no run writes"
        else:
            problem = None
        if problem:
            raise ValueError(f"{run.initial}: {problem}, and no {RUN_FILE} records a run here: this new run's "
                             "initial weights go there; move it away, or choose another --output")
        if not random_init:
            shutil.rmtree(run.initial)
    if random_init and (new_run or not run.initial.exists()):  # a first job's is replaced whole
        export_student(student, run.initial, tokenizer_dir, source=config.model, managed=True)


def build_data(config: TrainConfig, datasets: list[PretrainDataset], dist: Distributed, state: TrainState,
               unpad: bool, eval_every: int) -> tuple[Iterator[dict[str, Any]], list[dict[str, Any]]]:
    """This rank's micro-batches of the global order from the saved position,
    and (rank 0) the validation batches, padded, on the device."""
    optim = config.optim
    data = BlendedDatasets(datasets, config.data.weights, config.seed)
    order = GlobalOrder(len(data), config.seed)
    layout = batch_layout(config, dist.world_size, dist.rank)
    masking = None
    if config.data.dynamic_masking:
        try:
            masking = [DynamicMasking.for_dataset(d, config.seed) for d in datasets]
        except ValueError as err:  # DatasetError: names the dataset and the fix
            raise TrainError(str(err)) from err
    views = None
    if "mirror" in config.objective.objectives:  # the datasets share one tokenizer (checked)
        views = MirrorViews.for_manifest(datasets[0].manifest, config.seed, config.objective.mirror.span_tokens)
    max_len = max(d.manifest.max_seq_len for d in datasets)
    padded = CollateConfig(pad_id=datasets[0].manifest.tokenizer.special_ids.pad,
                           pad_to_multiple_of=config.data.pad_to_multiple_of,
                           pad_to_length=max_len if config.data.pad_to_max_length else None)
    train_collate = CollateConfig(padded.pad_id, padded.pad_to_multiple_of, padded.pad_to_length, unpad)
    loader = torch.utils.data.DataLoader(
        TrainingInstances(data, masking, views),
        batch_sampler=MicroBatchSampler(order, layout, state.consumed_samples),
        collate_fn=partial(collate, config=train_collate),
        num_workers=config.data.num_workers,
        pin_memory=dist.device.type == "cuda",
        worker_init_fn=ignore_in_worker,  # a scheduler's signal reaches the workers too
        # Its own generator: starting an iterator must not draw from the global RNG,
        # or a resumed run's dropout would differ from an uninterrupted one's.
        generator=torch.Generator().manual_seed(config.seed),
    )
    eval_batches: list[dict[str, Any]] = []
    if eval_every and dist.is_main:
        validation = BlendedDatasets(
            [PretrainDataset(d.path, split="validation") for d in datasets if d.manifest.has_validation])
        count = min(config.eval_instances, len(validation))
        chosen = np.unique(np.linspace(0, len(validation) - 1, count).round().astype(np.int64)).tolist()
        held_out = TrainingInstances(validation, views=views)
        try:
            eval_batches = [dist.move(collate([held_out[(0, k)] for k in chosen[i : i + optim.micro_batch_size]],
                                              padded))
                            for i in range(0, len(chosen), optim.micro_batch_size)]
        except DatasetError as err:  # a damaged validation shard, named with the instance: not a traceback
            raise TrainError(str(err)) from err
    vocab_size = datasets[0].manifest.tokenizer.vocab_size  # one tokenizer for all (checked)
    return checked_batches(iter(loader), vocab_size, data), eval_batches
