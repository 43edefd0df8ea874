"""Typed training configuration, one dataclass per concern, parsed once by
``train.py`` and passed down."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from .model import ObjectiveConfig


@dataclass(frozen=True)
class DataConfig:
    paths: tuple[str, ...]
    weights: tuple[float, ...] | None = None  # share of each dataset; None: their sizes
    pad_to_multiple_of: int = 8
    pad_to_max_length: bool = False
    num_workers: int = 2
    dynamic_masking: bool = False


@dataclass(frozen=True)
class OptimConfig:
    """Paper defaults: AdamW lr 1e-4, 10% linear warm-up then linear decay, batch
    256, 150k steps, clipping 1.0."""

    steps: int = 150_000
    lr: float = 1e-4
    weight_decay: float = 0.01
    warmup_ratio: float = 0.1
    betas: tuple[float, float] = (0.9, 0.999)
    eps: float = 1e-6
    grad_clip: float = 1.0
    batch_size: int = 256  # global, per optimizer step
    micro_batch_size: int = 32  # per rank

    def lr_factor(self, step: int) -> float:
        """Multiplier of ``lr`` after ``step`` optimizer steps."""
        warmup = max(1, int(self.warmup_ratio * self.steps))
        if step < warmup:
            return (step + 1) / warmup
        return max(0.0, (self.steps - step) / max(1, self.steps - warmup))


@dataclass(frozen=True)
class CheckpointConfig:
    save_every: int = 1000
    keep_last: int = 3
    resume: bool = False
    stop_after_steps: int | None = None  # end this job early, with a checkpoint


@dataclass(frozen=True)
class TrainConfig:
    model: str
    output: str
    deepspeed_config: str
    data: DataConfig
    objective: ObjectiveConfig = field(default_factory=ObjectiveConfig)
    optim: OptimConfig = field(default_factory=OptimConfig)
    checkpoint: CheckpointConfig = field(default_factory=CheckpointConfig)
    teacher_dtype: str | None = None  # None: fp16 on CUDA, fp32 on CPU
    seed: int = 1234
    log_every: int = 10
    export: bool = True
    eval_every: int = 1000  # held-out losses and self-similarity every N steps (0: off)
    eval_instances: int = 256

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
