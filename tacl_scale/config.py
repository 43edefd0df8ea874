"""Typed training configuration, one dataclass per concern, parsed once by
``train.py`` (the DeepSpeed JSON included) and passed down."""

from __future__ import annotations

import json
import math
import os
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, NamedTuple

from .data.loader import PAD_TO_MULTIPLE_OF

OBJECTIVES = ("tacl", "mlm", "nsp", "mirror")

POOLINGS = ("cls", "mean")


def _positive(value: float, or_zero: bool = False) -> bool:
    """Whether ``value`` is a finite number above 0 (or 0 itself with ``or_zero``):
    NaN fails every comparison and so passed checks written as ``value <= 0``."""
    return math.isfinite(value) and (value > 0 or (or_zero and value == 0))


@dataclass(frozen=True)
class MirrorConfig:
    """The sentence-level contrastive objective. The defaults are Mirror-BERT's
    sentence settings, except ``pooling``: ``cls``, Mirror-BERT's default
    ``agg_mode``. Its sentence script uses ``mean``; ``--mirror-pooling mean`` for that.

    ``span_tokens``: length in tokens of the random span of view 2 replaced by
    ``[MASK]`` tokens (0: no span masking, SimCSE). Mirror-BERT erases a span of 5
    *characters* of the string and puts one ``[MASK]`` in its place. Our data is
    already tokenized, so we mask 2 WordPiece tokens, about 5 characters of English
    text, and keep the length. As in Mirror-BERT, short sequences are left
    unmasked: a sequence needs ``6 × span_tokens`` maskable tokens, where
    Mirror-BERT asks for 30 characters for its 5.
    """

    temperature: float = 0.04  # Mirror-BERT's infoNCE_tau for sentences (SimCSE: 0.05)
    pooling: str = "cls"
    span_tokens: int = 2

    def __post_init__(self) -> None:
        if not _positive(self.temperature):
            raise ValueError(f"--mirror-temperature must be a finite number > 0, got {self.temperature}")
        if self.pooling not in POOLINGS:
            raise ValueError(f"mirror pooling {self.pooling!r} not in {POOLINGS}")
        if self.span_tokens < 0:
            raise ValueError(f"--mirror-span must be >= 0 tokens, got {self.span_tokens}")


@dataclass(frozen=True)
class ObjectiveConfig:
    """Which losses, the TaCL temperature (the paper's τ by default) and the settings of the
    sentence-level ``mirror`` objective. The default is TaCL: ``tacl,mlm,nsp``."""

    objectives: tuple[str, ...] = ("tacl", "mlm", "nsp")
    temperature: float = 0.01  # the paper's τ of Eq. 1
    tacl_impl: str = "auto"
    mirror: MirrorConfig = field(default_factory=MirrorConfig)
    # The paper's released code instead of Eq. 1 as written (docs/design.md, "What
    # differs from the paper's released code"): padding columns are TaCL negatives and
    # the teacher's dropout is on while training. Needs padded batches.
    reference_compat: bool = False

    def __post_init__(self) -> None:
        unknown = set(self.objectives) - set(OBJECTIVES)
        if unknown or not self.objectives:
            raise ValueError(f"--objectives must be a non-empty subset of {','.join(OBJECTIVES)}, got "
                             f"{','.join(self.objectives)}")
        if len(set(self.objectives)) != len(self.objectives):
            raise ValueError(f"--objectives {','.join(self.objectives)} name one twice")
        if not _positive(self.temperature):
            raise ValueError(f"--temperature must be a finite number > 0, got {self.temperature}")


# Evaluation every this many steps when --eval-every is not given and a --data
# directory has a validation split.
EVAL_EVERY_WITH_SPLIT = 1000


class ConfigError(ValueError):
    """A configuration file or a combination of settings is unusable; the message
    names the file or flags and what to change."""


def _require(condition: bool, message: str) -> None:
    if not condition:
        raise ConfigError(message)


@dataclass(frozen=True)
class EngineConfig:
    """The DeepSpeed JSON (``--ds``), read once. ``settings`` is the object as
    written; :func:`tacl_scale.engine_config.deepspeed_config` resolves it (batch sizes,
    clipping, precision) for a world size."""

    path: str
    settings: dict[str, Any] = field(default_factory=lambda: {"zero_optimization": {"stage": 2}})

    @classmethod
    def from_file(cls, path: str | Path) -> EngineConfig:
        """The DeepSpeed config at ``path``, read and checked (:class:`ConfigError`
        naming the file)."""
        try:
            settings = json.loads(Path(path).read_text(encoding="utf-8"))
        except OSError as err:
            raise ConfigError(f"{path}: unreadable DeepSpeed config: {err.strerror or err}") from err
        except ValueError as err:
            raise ConfigError(f"{path}: unreadable DeepSpeed config: {err}") from err
        if not isinstance(settings, dict):
            raise ConfigError(f"{path}: a DeepSpeed config must be a JSON object")
        if problem := _engine_settings_problem(settings):
            raise ConfigError(f"{path}: {problem}")
        return cls(str(path), settings)

    @property
    def precision(self) -> str:
        """``fp16``, ``bf16`` or ``fp32``: the student's training precision asked for;
        ``auto`` when a section's ``enabled`` is ``"auto"`` (as in DeepSpeed's HF
        integration): :meth:`precision_on` decides."""
        fp16 = self.settings.get("fp16", {}).get("enabled")
        bf16 = (self.settings.get("bf16") or self.settings.get("bfloat16") or {}).get("enabled")
        if "auto" in (fp16, bf16):
            return "auto"
        if fp16:
            return "fp16"
        if bf16:
            return "bf16"
        return "fp32"

    def precision_on(self, device_type: str, bf16_supported: bool = True, asked: str | None = None) -> str:
        """The precision the student trains in on a device of type ``device_type``:
        ``asked`` (``--precision``) or the config's; ``auto`` is bf16 on a GPU that
        has it, else fp16, and fp32 on the CPU; fp16 on the CPU accelerator is fp32
        (it has no fp16 training)."""
        wanted = asked or self.precision
        if wanted == "auto":
            if device_type == "cuda":
                return "bf16" if bf16_supported else "fp16"
            return "fp32"
        return "fp32" if device_type == "cpu" and wanted == "fp16" else wanted

    def trainer_settings_note(self) -> str | None:
        """What to say once when the config holds trainer settings (an older
        config): they are used, and where they belong now."""
        found = self.trainer_settings
        accumulation = self.settings.get("gradient_accumulation_steps", "auto")
        # Not a setting of the trainer's: it derives it from the global batch. With a
        # train_batch_size beside it the config's number agrees (DeepSpeed checks it);
        # alone, it stood for a global batch the trainer would silently not train with.
        ignored = ("" if accumulation == "auto" or self.settings.get("train_batch_size", "auto") != "auto" else
                   f"{self.path}: gradient_accumulation_steps {accumulation} is not used: the accumulation steps are "
                   "--batch-size / (micro-batch × ranks), so set --batch-size for the global batch you want")
        if not found:
            return ignored or None
        listed = ", ".join(f"{name} {value}" for name, value in found.items())
        used = (f"{self.path} holds settings of the trainer's ({listed}): used where no flag gives them, over a "
                "--recipe; DeepSpeed configs now leave them to the trainer (\"auto\"): give them as flags instead")
        return f"{used}. {ignored}" if ignored else used

    @property
    def trainer_settings(self) -> dict[str, Any]:
        """Settings of the trainer's that an older DeepSpeed config holds as numbers
        (batch sizes, clipping, the optimizer's params), by OptimConfig field name.
        The user's config wins over a recipe with them (see tacl_scale.recipes);
        ``"auto"`` (the trainer decides) is not one."""
        found: dict[str, Any] = {}
        for key, name in (("train_batch_size", "batch_size"), ("train_micro_batch_size_per_gpu", "micro_batch_size"),
                          ("gradient_clipping", "grad_clip")):
            if self.settings.get(key, "auto") != "auto":
                found[name] = self.settings[key]
        params = self.settings.get("optimizer", {}).get("params", {})
        for key in ("lr", "weight_decay", "eps"):
            if params.get(key, "auto") != "auto":
                found[key] = params[key]
        if params.get("betas", "auto") != "auto":
            found["betas"] = tuple(params["betas"])
        return found


# The sections of a DeepSpeed config the trainer reads or writes into (timers,
# data_types, checkpoint) and the other sections DeepSpeed's reference documents as
# objects: DeepSpeed does not check their type, and a string there was a traceback
# from inside the trainer or the engine.
_ENGINE_SECTIONS = ("fp16", "bf16", "bfloat16", "optimizer", "zero_optimization", "timers", "data_types",
                    "checkpoint", "compile", "activation_checkpointing", "flops_profiler", "tensorboard", "wandb",
                    "csv_monitor", "comet", "comms_logger", "aio")
# The trainer's settings (older configs hold them) with the JSON types they may have
# and the least each may be (as OptimConfig's flags), and its optimizer's params.
_ENGINE_NUMBERS = {"train_batch_size": (int, 1), "train_micro_batch_size_per_gpu": (int, 1),
                   "gradient_accumulation_steps": (int, 1), "gradient_clipping": ((int, float), 0)}
_OPTIMIZER_NUMBERS = ("lr", "weight_decay", "eps")
# DeepSpeed's own top-level settings that it reads without checking their type, with
# the type they must have: "auto" (or a string for a number) failed at the first step,
# after the run directory was written, in a TypeError.
_DEEPSPEED_SCALARS = {"steps_per_print": (int, float), "wall_clock_breakdown": bool, "dump_state": bool,
                      "memory_breakdown": bool, "prescale_gradients": bool, "gradient_predivide_factor": (int, float),
                      "zero_allow_untested_optimizer": bool, "sparse_gradients": bool}


def _engine_settings_problem(settings: dict[str, Any]) -> str | None:
    """What in a DeepSpeed config the trainer cannot read, in words naming the
    setting, or None: a section that is not an object, a number that is not one
    (``"auto"`` aside). Each was a traceback from deep inside the trainer."""
    def number(value: Any, kind: type | tuple[type, ...]) -> bool:
        return value == "auto" or (isinstance(value, kind) and not isinstance(value, bool))

    for section in _ENGINE_SECTIONS:
        if section in settings and not isinstance(settings[section], dict):
            return f"{section} must be a JSON object, not {settings[section]!r}"
    for section in ("fp16", "bf16", "bfloat16"):
        enabled = settings.get(section, {}).get("enabled", False)
        if not (isinstance(enabled, bool) or enabled == "auto"):
            return f"{section}.enabled must be true, false or \"auto\", not {enabled!r}"
    params = settings.get("optimizer", {}).get("params", {})
    if not isinstance(params, dict):
        return f"optimizer.params must be a JSON object, not {params!r}"
    for name, (kind, least) in _ENGINE_NUMBERS.items():
        value = settings.get(name, "auto")
        what = "an integer" if kind is int else "a number"
        if not number(value, kind):
            return f"{name} must be {what} or \"auto\", not {value!r}"
        if value != "auto" and not (math.isfinite(value) and value >= least):
            return f"{name} must be {what} >= {least} or \"auto\", not {value!r}"
    for name in _OPTIMIZER_NUMBERS:
        value = params.get(name, "auto")
        if not number(value, (int, float)):
            return f"optimizer.params.{name} must be a number or \"auto\", not {value!r}"
        if value != "auto" and not _positive(value, or_zero=name == "weight_decay"):
            least = ">= 0" if name == "weight_decay" else "> 0"
            return f"optimizer.params.{name} must be a finite number {least} or \"auto\", not {value!r}"
    betas = params.get("betas", "auto")
    if betas != "auto" and not (isinstance(betas, list) and len(betas) == 2
                                and all(number(beta, (int, float)) and beta != "auto" for beta in betas)):
        return f"optimizer.params.betas must be two numbers or \"auto\", not {betas!r}"
    if betas != "auto" and not all(0 <= beta < 1 for beta in betas):
        return f"optimizer.params.betas must be two numbers in [0, 1), not {betas!r}"
    for name, kind in _DEEPSPEED_SCALARS.items():
        value = settings.get(name)
        if value is None:
            continue
        # steps_per_print: DeepSpeed prints when step % it is 0, so any number >= 1 does
        # (1e5 in many copied configs is a float; Infinity never prints).
        at_least_one = name == "steps_per_print"
        what = "true or false" if kind is bool else "a number >= 1" if at_least_one else "a finite number > 0"
        fits = (isinstance(value, bool) if kind is bool else number(value, kind) and value != "auto"
                and (value >= 1 if at_least_one else _positive(value)))
        if not fits:
            auto = (": tacl-scale fills in \"auto\" only for the batch sizes, gradient_clipping, fp16/bf16.enabled "
                    "and the optimizer's params" if value == "auto" else "")
            return f"{name} must be {what}, not {value!r}{auto}"
    return None


@dataclass(frozen=True)
class DataConfig:
    """The datasets a run trains on and how its batches are made of them."""

    paths: tuple[str, ...]  # dataset directories (data_prep.build's output)
    weights: tuple[float, ...] | None = None  # share of each dataset; None: their sizes
    pad_to_multiple_of: int = PAD_TO_MULTIPLE_OF  # padded batches' length rounds up to a multiple of this
    pad_to_max_length: bool = False  # pad every batch to the dataset's maximum length (the released code's way)
    num_workers: int = 2  # DataLoader worker processes per rank
    dynamic_masking: bool = False  # mask each instance anew every time it is drawn, not the build's static masks
    # Check every shard file's checksum before training; None: when the datasets hold
    # at most tacl_scale.data.integrity.VERIFY_BY_DEFAULT_BYTES (20 GB).
    verify: bool | None = None

    def __post_init__(self) -> None:
        _require(self.num_workers >= 0, f"--num-workers must be >= 0, got {self.num_workers}")
        _require(self.pad_to_multiple_of >= 1, f"pad_to_multiple_of must be >= 1, got {self.pad_to_multiple_of}")
        if self.weights is not None:
            _require(len(self.weights) == len(self.paths) and all(_positive(w) for w in self.weights),
                     f"--data-weights must be one finite positive weight per --data, got {list(self.weights)}")
        seen: dict[str, str] = {}
        for path in self.paths:  # each instance would come twice an epoch
            key = os.path.realpath(path)
            again = "is given twice" if seen.get(key) == path else f"names the dataset of --data {seen.get(key)} again"
            _require(key not in seen, f"--data {path} {again}: give each dataset once (--data-weights gives one a "
                     "larger share)")
            seen[key] = path


LR_SCHEDULES = ("linear", "constant")
PRECISIONS = ("auto", "bf16", "fp16", "fp32")
TEACHER_DTYPE_NAMES = ("bf16", "fp16", "fp32")  # --teacher-dtype; tacl_scale.model.TEACHER_DTYPES maps them


@dataclass(frozen=True)
class OptimConfig:
    """Paper defaults: AdamW lr 1e-4, 10% linear warm-up then linear decay, batch
    256, 150k steps, clipping 1.0."""

    steps: int = 150_000  # optimizer updates applied (skipped fp16 overflow steps do not count)
    lr: float = 1e-4
    weight_decay: float = 0.01
    warmup_ratio: float = 0.1
    betas: tuple[float, float] = (0.9, 0.999)
    eps: float = 1e-6
    grad_clip: float = 1.0
    batch_size: int = 256  # global, per optimizer step
    micro_batch_size: int | None = None  # per rank; None: "auto", the largest that fits (tacl_scale.memory)
    max_skipped_in_a_row: int = 100  # stop with an error after this many non-finite steps in a row
    # After the warm-up: "linear" decay to 0 at ``steps`` (TaCL, BERT), or "constant"
    # (Mirror-BERT and SimCSE train at a fixed lr).
    schedule: str = "linear"

    def __post_init__(self) -> None:
        _require(self.schedule in LR_SCHEDULES, f"lr schedule {self.schedule!r} not in {LR_SCHEDULES}")
        _require(self.steps >= 1, f"--steps must be >= 1, got {self.steps}")
        _require(_positive(self.lr), f"--lr must be a finite number > 0, got {self.lr}")
        _require(_positive(self.weight_decay, or_zero=True),
                 f"--weight-decay must be a finite number >= 0, got {self.weight_decay}")
        _require(0 <= self.warmup_ratio <= 1, f"--warmup-ratio must be in [0, 1], got {self.warmup_ratio}")
        _require(all(0 <= b < 1 for b in self.betas) and len(self.betas) == 2,
                 f"AdamW betas must be two numbers in [0, 1), got {list(self.betas)}")
        _require(_positive(self.eps), f"AdamW eps must be a finite number > 0, got {self.eps}")
        _require(_positive(self.grad_clip, or_zero=True),
                 f"--grad-clip must be a finite number >= 0, got {self.grad_clip}")
        _require(self.batch_size >= 1, f"--batch-size must be >= 1, got {self.batch_size}")
        _require(self.micro_batch_size is None or self.micro_batch_size >= 1,
                 f"--micro-batch-size must be >= 1, got {self.micro_batch_size}")
        _require(self.max_skipped_in_a_row >= 1, f"max_skipped_in_a_row must be >= 1, got {self.max_skipped_in_a_row}")

    def lr_factor(self, step: int) -> float:
        """Multiplier of ``lr`` after ``step`` applied optimizer updates.

        The warm-up rises linearly to the peak, reached by update ``warmup - 1``
        and by no other; the linear decay falls from there to 0 after update
        ``steps - 1``, so each of the ``steps`` updates uses a rate of its own.
        """
        warmup = max(1, int(self.warmup_ratio * self.steps))
        if step < warmup:
            return (step + 1) / warmup
        if self.schedule == "constant":
            return 1.0
        # Counted from the peak's update, warmup - 1, not from warmup: the decay's
        # first update is below the peak instead of a second update at it.
        return max(0.0, (self.steps - step) / (self.steps - warmup + 1))


@dataclass(frozen=True)
class CheckpointConfig:
    """When a run saves, what it keeps, and how a job continues one."""

    save_every: int = 1000  # steps between checkpoints (and one at the end of every job)
    keep_last: int = 3  # checkpoints kept, the newest; 0: all
    resume: bool = False  # continue the run in --output from its newest checkpoint that verifies
    stop_after_steps: int | None = None  # end this job early, with a checkpoint
    # Resume with other data, objectives, model or optimizer settings than the run's
    # (refused without it; recorded in run.json's history with it).
    allow_changes: bool = False

    def __post_init__(self) -> None:
        _require(self.save_every >= 1, f"--save-every must be >= 1, got {self.save_every}")
        _require(self.keep_last >= 0, f"--keep-last must be >= 0 (0: keep all), got {self.keep_last}")
        _require(self.stop_after_steps is None or self.stop_after_steps >= 1,
                 f"--stop-after-steps must be >= 1, got {self.stop_after_steps}")


class ResolvedPerformance(NamedTuple):
    """What :meth:`PerformanceConfig.resolve` settled for a device."""

    unpad: bool
    fused_optimizer: bool
    # Why a setting asked for (or the default) is not used on this device: unpadded
    # batches without FlashAttention-2, --compile on packed fp32 batches, or packed
    # batches for a compiled fp32 teacher.
    warning: str | None = None
    compile: bool = False  # student and teacher encoders through torch.compile (tacl_scale.encoder)


@dataclass(frozen=True)
class PerformanceConfig:
    """How the step runs on the device. For ``unpad``, ``fused_optimizer`` and
    ``compile`` None means "on CUDA, off elsewhere" (``unpad`` also off with
    ``--pad-to-max-length``); the other fields say what their None means."""

    unpad: bool | None = None  # packed batches, attention over real tokens only
    fused_optimizer: bool | None = None  # torch.optim.AdamW(fused=True)
    teacher_dtype: str | None = None  # None: fp16 on CUDA, fp32 on CPU
    # Student and teacher encoders through torch.compile (tacl_scale.encoder): fused
    # element-wise work, one QKV product, packed batches in token buckets.
    compile: bool | None = None  # None: on CUDA, off elsewhere
    # With compile: each token bucket's encoder forward and backward captured as CUDA
    # graphs and replayed (torch.compile's reduce-overhead). Not measured on a GPU yet: off by default.
    cuda_graphs: bool = False
    # The student's precision, over the DeepSpeed config's: auto (bf16 where the GPU
    # has it, else fp16; fp32 on the CPU), bf16, fp16 (the paper's) or fp32.
    precision: str | None = None  # None: the config's

    def __post_init__(self) -> None:
        _require(not self.cuda_graphs or self.compile is not False, "--cuda-graphs needs --compile")
        _require(self.precision in (None, *PRECISIONS),
                 f"--precision must be one of {', '.join(PRECISIONS)}, got {self.precision}")

    def resolve(self, device_type: str, pad_to_max_length: bool = False,
                varlen_unsupported: str | None = None, precision: str = "bf16",
                teacher_dtype: str | None = None) -> ResolvedPerformance:
        """The settings on a device of type ``device_type`` training in ``precision``
        with a teacher in ``teacher_dtype`` (``None``: no teacher).
        ``varlen_unsupported`` (from :func:`tacl_scale.attention.varlen_unsupported`)
        says why this CUDA device cannot run FlashAttention-2's varlen kernel:
        unpadded batches then fall back to padded ones (SDPA), with a warning to log
        once."""
        on_cuda = device_type == "cuda"
        unpad = self.unpad if self.unpad is not None else on_cuda and not pad_to_max_length
        if unpad and pad_to_max_length:
            raise ConfigError("--unpad packs batches, --pad-to-max-length pads them: choose one")
        fused = self.fused_optimizer if self.fused_optimizer is not None else on_cuda
        compiled = self.compile if self.compile is not None else on_cuda
        if unpad and on_cuda and varlen_unsupported:
            return ResolvedPerformance(False, fused, f"unpadded batches need FlashAttention-2, and "
                                       f"{varlen_unsupported}: training on padded batches (SDPA) instead", compiled)
        if compiled and unpad and on_cuda and precision == "fp32":
            # FlashAttention needs half precision; the compiled encoder's other packed
            # attention is a dense mask, O(tokens²) memory: fine on a CPU test, not here.
            return ResolvedPerformance(unpad, fused, "the compiled encoder runs packed fp32 batches only on the CPU: "
                                       "training without --compile (use a bf16/fp16 config to have both)", False)
        if compiled and unpad and on_cuda and teacher_dtype == "fp32":
            # The same dense mask, for the teacher alone: padded batches need none and keep
            # both encoders compiled (packing saved 8% of a step at micro 256, benchmarks.md).
            return ResolvedPerformance(False, fused, "--teacher-dtype fp32: FlashAttention takes fp16/bf16 only, and "
                                       "the compiled teacher's other packed attention is a dense mask over the "
                                       "micro-batch's tokens: training on padded batches (SDPA) instead "
                                       "(--teacher-dtype fp16 or bf16 trains packed)", compiled)
        return ResolvedPerformance(unpad, fused, compile=compiled)


@dataclass(frozen=True)
class TrainConfig:
    """Everything a training job does, parsed once from the command line (and the
    recipe, and the --ds config) by ``train.py`` and passed down; ``run.json``
    records it. Paths are absolute."""

    model: str  # a HF BERT directory to continue, or a BertConfig JSON to start from random weights
    output: str  # the run directory (tacl_scale.run_dir)
    engine: EngineConfig  # the DeepSpeed config: ZeRO stage, precision, buckets
    data: DataConfig
    objective: ObjectiveConfig = field(default_factory=ObjectiveConfig)
    optim: OptimConfig = field(default_factory=OptimConfig)
    checkpoint: CheckpointConfig = field(default_factory=CheckpointConfig)
    performance: PerformanceConfig = field(default_factory=PerformanceConfig)
    seed: int = 1234
    log_every: int = 10
    export: bool = True
    # Validation losses and self-similarity every N steps; None: EVAL_EVERY_WITH_SPLIT
    # when a --data directory has a validation split, else off; 0: off.
    eval_every: int | None = None
    eval_instances: int = 256  # validation instances evaluated, spread over the split(s)
    recipe: str | None = None  # --recipe's name: a path it filled that is missing is said to be its

    def __post_init__(self) -> None:
        if self.objective.reference_compat:
            # The released code pads every batch to max_len and keeps its teacher in
            # fp32: the mode sets both, here, for a config built in code as for the CLI's.
            performance = self.performance
            _require(performance.unpad is not True,
                     "--reference-compat counts padding columns as negatives: it cannot run with --unpad")
            _require(performance.teacher_dtype in (None, "fp32"),
                     "--reference-compat runs the teacher in fp32, as the released code: not --teacher-dtype "
                     f"{performance.teacher_dtype}")
            object.__setattr__(self, "performance", replace(performance, unpad=False, teacher_dtype="fp32"))
            object.__setattr__(self, "data", replace(self.data, pad_to_max_length=True))
        _require(self.log_every >= 1, f"--log-every must be >= 1, got {self.log_every}")
        # numpy's SeedSequence (the data order, dynamic masks) takes no negative seed, torch none of 2**64
        _require(0 <= self.seed < 2**63, f"--seed must be in [0, 2**63), got {self.seed}")
        _require(self.eval_every is None or self.eval_every >= 0, f"--eval-every must be >= 0, got {self.eval_every}")
        _require(self.eval_instances >= 1, f"--eval-instances must be >= 1, got {self.eval_instances}")

    def settings_without_effect(self) -> list[str]:
        """A line for each setting moved from its default that the chosen objectives
        never use (``--temperature`` without ``tacl``): accepted, since a recipe or a
        script may set it for other runs, but said, since whoever gave it expects it
        to act."""
        objectives, objective = self.objective.objectives, self.objective
        lines: list[str] = []

        def unused(flag: str, value: object, needs: str) -> None:
            lines.append(f"{flag}{'' if value is None else f' {value}'} has no effect: --objectives "
                         f"{','.join(objectives)} has no {needs}")

        if "tacl" not in objectives:
            if objective.temperature != ObjectiveConfig.temperature:
                unused("--temperature", objective.temperature, "tacl")
            if objective.tacl_impl != ObjectiveConfig.tacl_impl:
                unused("--tacl-impl", objective.tacl_impl, "tacl")
            if self.performance.teacher_dtype is not None and not objective.reference_compat:
                unused("--teacher-dtype", self.performance.teacher_dtype, "tacl (its teacher is the only one)")
        if "mirror" not in objectives:
            default = MirrorConfig()
            for flag, name in (("--mirror-temperature", "temperature"), ("--mirror-pooling", "pooling"),
                               ("--mirror-span", "span_tokens")):
                if getattr(objective.mirror, name) != getattr(default, name):
                    unused(flag, getattr(objective.mirror, name), "mirror")
        if self.data.dynamic_masking and not {"tacl", "mlm"} & set(objectives):
            unused("--dynamic-masking", None, "mlm or tacl (the objectives that read the masks)")
        return lines

    def job_end(self, first_step: int) -> int:
        """The step a job that starts at ``first_step`` ends at: ``--steps``, or
        earlier with ``--stop-after-steps``."""
        stop_after = self.checkpoint.stop_after_steps
        return self.optim.steps if stop_after is None else min(self.optim.steps, first_step + stop_after)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
