"""Continuing a run from its newest checkpoint: which one (the newest that verifies,
converted to DeepSpeed's universal format when the number of ranks changed), loading
it with the global data position (:class:`TrainState`, the checkpoint's client
state), and this job's optimizer settings and schedule over what it restored."""

from __future__ import annotations

import logging
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import checkpoint
from .errors import TrainError

if TYPE_CHECKING:
    from deepspeed import DeepSpeedEngine

    from .config import OptimConfig, TrainConfig
    from .distributed import Distributed
    from .parts import EngineParts
    from .run_dir import RunDir

# The Trainer's logger, as parts.py's: tests and users filter the run's build and training on one name.
log = logging.getLogger("tacl_scale.trainer")


@dataclass
class TrainState:
    """What a checkpoint's client state holds besides the engine."""

    step: int = 0  # optimizer updates applied
    consumed_samples: int = 0  # global position: samples of all ranks trained on (skipped steps included)
    skipped: int = 0  # updates skipped for non-finite gradients

    def client_state(self, batch_size: int) -> dict[str, int]:
        """What a checkpoint records of this state (DeepSpeed's client state, read
        back by :func:`restore`), with the global batch it was trained at."""
        return {"step": self.step, "consumed_samples": self.consumed_samples, "skipped": self.skipped,
                "batch_size": batch_size}

    @classmethod
    def from_client_state(cls, client: dict[str, Any], batch_size: int) -> TrainState:
        """The state a checkpoint recorded with :meth:`client_state`. A checkpoint
        from before the global data order has no ``consumed_samples``: its position
        is taken as ``step`` × ``batch_size`` (not exact; :func:`restore` says so)."""
        consumed = client.get("consumed_samples", int(client["step"]) * batch_size)
        return cls(int(client["step"]), int(consumed), int(client.get("skipped", 0)))


def checkpoint_to_resume(run: RunDir, dist: Distributed) -> str | None:
    """Rank 0 picks the newest checkpoint whose files verify (warning about
    newer ones that do not); when it was saved at another number of ranks, its
    DeepSpeed universal conversion (made here once). Every rank gets the tag."""
    ckpt_root = run.checkpoints

    def choose() -> tuple[str | None, list[str], str | None]:  # minutes for a large model: the others wait
        tag, problems = checkpoint.newest_verified_tag(ckpt_root)
        if tag is None:
            return tag, problems, None
        try:
            saved = checkpoint.saved_world_size(ckpt_root / tag)
        except ValueError as err:  # refused on every rank below, never rank 0's traceback alone
            return tag, problems, f"--resume: {err}"
        if saved != dist.world_size:
            log.info("%s was saved by %d rank(s), this job has %d: converting it to a DeepSpeed "
                     "universal checkpoint", ckpt_root / tag, saved, dist.world_size)
            try:
                tag = checkpoint.universal_copy(ckpt_root, tag, run.universal_log)
            except RuntimeError as err:
                return tag, problems, str(err)
        return tag, problems, None

    tag, problems, error = dist.wait_for_main(choose)
    if error is not None:
        raise TrainError(error)
    for problem in problems if dist.is_main else []:
        log.warning("skipping a checkpoint that does not verify: %s", problem)
    if tag is None and problems:
        raise TrainError(f"--resume: no checkpoint under {ckpt_root} verifies; the newest fails with {problems[0]}")
    if tag is not None and problems and dist.is_main:
        log.warning("resuming from the older checkpoint %s", ckpt_root / tag)
    if tag is None and dist.is_main:  # a job requeued before the run's first save, or a first job
        log.info("--resume: no checkpoint in %s yet: starting the run from step 0", run.path)
    return tag


def restore(engine: DeepSpeedEngine, ckpt_root: Path, tag: str | None, config: TrainConfig,
            world_size: int) -> TrainState:
    """Load checkpoint ``tag`` (from :func:`checkpoint_to_resume`): weights,
    optimizer, schedule and the global data position; a fresh state without one."""
    if tag is None:
        return TrainState()
    client = checkpoint.load(engine, ckpt_root, tag)
    batch_size = config.optim.batch_size
    saved_batch = int(client.get("batch_size", batch_size))
    if saved_batch != batch_size:
        raise TrainError(f"{ckpt_root / tag} was trained with a global batch of {saved_batch}; "
                         f"--batch-size {batch_size} would change the data order and the schedule: resume "
                         f"with --batch-size {saved_batch} (ranks and micro-batch size may change)")
    state = TrainState.from_client_state(client, batch_size)
    if "consumed_samples" not in client:  # saved before the global order: its position cannot be carried over exactly
        log.warning("%s predates the global data order: continuing at sample %d of the new order",
                    ckpt_root / tag, state.consumed_samples)
    log.info("resumed from %s at step %d (%d samples consumed, %d ranks)", ckpt_root / tag, state.step,
             state.consumed_samples, world_size)
    return state


def check_steps_left(checkpoint_dir: Path, step: int, steps: int, is_main: bool) -> None:
    """Refuse a resume whose checkpoint is past ``--steps`` (it trained nothing and
    exported nothing, silently); say so when the run is already complete."""
    if step > steps:
        raise TrainError(f"{checkpoint_dir}: the run is at step {step}, past --steps {steps}: resume with --steps "
                         f"above {step} (and --allow-changes), or start a new run in another --output")
    if step == steps and is_main:
        log.info("the run is complete (step %d of %d): nothing to train; its export is written again", step, steps)


def apply_optimizer_settings(engine: EngineParts, optim: OptimConfig, step: int) -> None:
    """This job's AdamW settings and learning-rate schedule at ``step``, over what a
    checkpoint restored. DeepSpeed restores the optimizer's parameter groups (lr,
    betas, eps, weight decay) and the scheduler's state, whose base lr is the run's
    first ``--lr``, as they were saved: a job resumed with ``--allow-changes`` and
    another ``--lr``, ``--weight-decay`` or ``--steps`` kept the old values, and its
    first update took the old schedule's next lr (0 after a finished run). With the
    run's own settings this changes nothing."""
    scheduler = engine.scheduler
    groups = scheduler.optimizer.param_groups
    for group, weight_decay in zip(groups, (optim.weight_decay, 0.0), strict=True):  # build_optimizer's groups
        group.update(weight_decay=weight_decay, betas=optim.betas, eps=optim.eps, initial_lr=optim.lr)
    scheduler.base_lrs = [optim.lr] * len(groups)
    scheduler.last_epoch = step - 1
    with warnings.catch_warnings():  # a checkpoint from before the first update: no optimizer step yet
        warnings.filterwarnings("ignore", message="Detected call of `lr_scheduler.step")
        scheduler.step()  # each group's lr = lr × lr_factor(step): the next update's
