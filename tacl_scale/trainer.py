"""The training loop: ``Trainer.build(config, dist)`` builds a run once and ``train()`` runs it.

Building is :func:`tacl_scale.parts.build_run`: the datasets, the student and its
frozen teacher, the DeepSpeed engine around the student (optimizer and schedule
included), the resume state, the data loader from the saved global data position,
the validation batches and the metrics logger, in that order, as one
:class:`~tacl_scale.parts.RunParts`. Running: every iteration of
:meth:`Trainer.train` is ``step_and_log`` (``train_step``, its metrics queued for the
log) → maybe evaluate → maybe checkpoint → preemption check, and ``finish`` ends the
job (the export of a complete run).

The step counter counts optimizer updates actually applied: when fp16's loss scaler
finds non-finite gradients DeepSpeed skips the update and does not advance the
schedule, and neither does the counter, so the warm-up keeps its length, the logged
lr is the one each update used, and after ``--steps`` updates the lr is 0.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from . import checkpoint
from .config import TrainConfig
from .data.loader import sequence_lengths
from .data.manifest import DatasetError
from .data.shuffle import DIGEST_MODULUS, sample_digest
from .distributed import Distributed
from .encoder import new_micro_batch
from .errors import RankError, TrainError
from .evaluation import evaluate, layer_self_similarity
from .export import export_weights
from .files import describe_write_error
from .flops import mfu, step_flops
from .master_weights import engine_master_weights
from .model import teacher_states
from .parts import RunParts, build_run
from .preemption import StopRequest
from .resume import TrainState
from .run_dir import RunDir

__all__ = ["RankError", "StepResult", "Trainer", "TrainError", "TrainState"]

log = logging.getLogger("tacl_scale.trainer")


def micro_batch_seed(seed: int, micro_batch: int, stream: int = 0) -> int:
    """The RNG seed of one micro-batch's dropout masks, from the run's seed and the
    micro-batch's global index: ``stream`` 0 the student's, 1 the teacher's (under
    ``--reference-compat``), independent of each other."""
    states = np.random.SeedSequence([seed, micro_batch]).generate_state(stream + 1, dtype=np.uint64)
    return int(states[stream] >> 1)


@dataclass
class StepResult:
    """One optimizer step as :meth:`Trainer.train_step` leaves it: what the host
    knows, and the losses still on the device (their all-reduce queued), so the step
    ends without waiting for the GPU. :attr:`metrics` reads them (and waits)."""

    applied: bool
    keys: list[str]  # the names of the first values of ``totals``
    totals: torch.Tensor  # summed over ranks: each loss averaged over the micro-batches, then sequences, tokens
    digest: torch.Tensor  # int64, the ranks' sample digests summed
    host: dict[str, float]  # lr, skipped_steps, loss_scale: known on the host
    world_size: int
    started: float  # time.monotonic() when the step began
    grad_norm: Any = None  # DeepSpeed's, as it keeps it (a float or a 0-d tensor)
    tokens: int = 0  # real tokens this rank trained on
    flops: dict[str, float] = field(default_factory=dict)  # this rank's model FLOPs: student, teacher, total
    peak: float | None = None  # the GPU's datasheet peak, for the MFU
    _metrics: dict[str, float] | None = None

    def read(self, seconds: float | None = None) -> dict[str, float]:
        """The global batch's metrics (losses averaged over ranks, throughput from
        ``seconds`` per step, or the time from the step's start to now). The first
        call waits for the step's values; later calls return the same dict."""
        if self._metrics is None:
            totals = self.totals.tolist()
            elapsed = seconds if seconds is not None else time.monotonic() - self.started
            metrics = {k: v / self.world_size for k, v in zip(self.keys, totals[: len(self.keys)], strict=True)}
            metrics.update(self.host)
            metrics["samples_per_s"] = totals[-2] / max(elapsed, 1e-9)
            metrics["tokens_per_s"] = totals[-1] / max(elapsed, 1e-9)
            if self.grad_norm is not None and self.applied:
                metrics["grad_norm"] = float(self.grad_norm)
            if self.peak is not None:  # GPUs only: model FLOPs utilisation of this rank's step
                metrics["mfu"] = mfu(self.flops["total"], elapsed, self.peak)
            self._metrics = metrics
        return self._metrics

    @property
    def metrics(self) -> dict[str, float]:
        return self.read()

    @property
    def sample_digest(self) -> int:
        """Order-free fingerprint of the global batch's samples (same set, same digest)."""
        return int(self.digest.item()) % DIGEST_MODULUS


@dataclass
class _StepWork:
    """What one rank's micro-batches of a step leave (:meth:`Trainer.micro_batches`)."""

    keys: list[str] = field(default_factory=list)  # the loss names, sorted: the rows of ``sums``
    sums: torch.Tensor | None = None  # each loss summed over the micro-batches, on the device
    lengths: list[int] = field(default_factory=list)  # each sequence's real tokens
    masked_tokens: int = 0
    digest: int = 0  # the samples' order-free digest


class Trainer:
    """One TaCL run on this rank: the parts :func:`~tacl_scale.parts.build_run`
    built, and the loop that runs them (see the module docstring)."""

    def __init__(self, dist: Distributed, parts: RunParts, stop_request: StopRequest | None = None) -> None:
        self.parts = parts  # what build_run built; the loop's own state below
        self.dist = dist
        self.run = RunDir(parts.config.output)
        fast = parts.engine.module.fast
        self.cuda_graphs = fast is not None and fast.cuda_graphs and dist.device.type == "cuda"
        self.first_step = parts.state.step
        self.skipped_in_a_row = 0
        self.stop_request = stop_request or StopRequest()  # see build
        self.pending: list[StepResult] = []  # steps whose metrics are not read yet (see train)
        self.window_started = time.monotonic()
        self.saved_step = parts.resumed_step  # the step of the newest checkpoint (-1: none)

    @property
    def config(self) -> TrainConfig:
        """The run's settings with what the device decided (the micro-batch)."""
        return self.parts.config

    @property
    def state(self) -> TrainState:
        return self.parts.state

    @property
    def engine(self) -> Any:
        """The DeepSpeed engine."""
        return self.parts.engine.engine

    @classmethod
    def build(cls, config: TrainConfig, dist: Distributed, stop_request: StopRequest | None = None) -> Trainer:
        """Build a run (:func:`~tacl_scale.parts.build_run`) and its Trainer; a
        new job clears the preemption marker the previous one left.
        ``stop_request``: the handler ``train.py`` installed before anything else
        (default: one that no signal fills, so a library caller's process keeps its
        own SIGTERM and SIGUSR1 handlers; pass ``StopRequest.install()`` to stop at
        a step boundary on them, as ``train.py`` does)."""
        parts = build_run(config, dist)
        if dist.is_main:
            RunDir(config.output).preempted_marker.unlink(missing_ok=True)
        return cls(dist, parts, stop_request)

    # -- running --------------------------------------------------------------------------------------------

    @property
    def last_step(self) -> int:
        """The step this job ends at (``--stop-after-steps`` may end it early)."""
        return self.config.job_end(self.first_step)

    def train(self) -> list[dict[str, float]]:
        """Run to ``--steps`` applied updates (or this job's end); export the
        student when the run is complete. Returns rank 0's per-step metrics.

        Steps do not wait for the GPU: their metrics are read (and logged) every
        ``--log-every`` steps and before an evaluation, a checkpoint or the end, so
        the host queues the next step while the GPU runs this one. Throughput is
        the average over those steps."""
        self.engine.train()
        # A signal that came while the run was being built stops it before the first step.
        preempted = self.state.step < self.last_step and self.preemption_requested(every_rank_now=True)
        self.window_started = time.monotonic()
        while self.state.step < self.last_step and not preempted:
            result = self.step_and_log()
            if result.applied:
                self.maybe_evaluate()
                if not self.export_follows():  # else export() saves the last step, while it writes
                    self.maybe_checkpoint()
            if not self.pending:  # flushed: the next window starts after this step's evaluation or save
                self.window_started = time.monotonic()
            preempted = self.preemption_requested()
        self.flush_metrics()
        if not preempted:  # a preempted job said so itself
            self.finish()
        self.dist.barrier()
        return self.parts.metrics.history

    def step_and_log(self) -> StepResult:
        """:meth:`train_step`, its metrics queued for the next log (a skipped update
        is logged at once, as are the skipped updates before a divergence)."""
        try:
            result = self.train_step()
        except TrainError:
            self.flush_metrics()
            raise
        self.pending.append(result)
        if not result.applied or self.state.step % self.config.log_every == 0:
            self.flush_metrics()
        return result

    def finish(self) -> None:
        """The end of a job that was not preempted: the export of a complete run, or
        the line of one that ``--stop-after-steps`` ended (the run is not done)."""
        if self.export_follows():
            self.export()
        elif self.state.step < self.config.optim.steps and self.dist.is_main:
            print(f"stopped at step {self.state.step} of {self.config.optim.steps} (--stop-after-steps "
                  f"{self.config.checkpoint.stop_after_steps}), checkpointed: rerun with --resume to continue",
                  flush=True)

    def export_follows(self) -> bool:
        """Whether the run is at its last step and writes its export next."""
        return self.state.step == self.config.optim.steps and self.config.export

    def flush_metrics(self) -> None:
        """Read the pending steps' metrics (one wait for the GPU) and log them in
        order, each with the pending steps' average throughput."""
        if not self.pending:
            return
        for result in self.pending:
            result.totals.tolist()  # wait for the GPU to finish these steps: the window is their time
        seconds = (time.monotonic() - self.window_started) / len(self.pending)
        step = self.state.step - sum(r.applied for r in self.pending)
        for result in self.pending:
            metrics = result.read(seconds)
            if result.applied:
                step += 1
                self.parts.metrics.log_step(step, metrics, {"sample_digest": result.sample_digest})
            else:
                self.parts.metrics.log_skipped(step, int(metrics["skipped_steps"]), metrics.get("loss_scale"))
        self.pending = []
        self.window_started = time.monotonic()

    def train_step(self) -> StepResult:
        """One optimizer step: ``accumulation`` micro-batches through teacher and
        student, backward, and the engine's update at the boundary (which DeepSpeed
        may skip). The losses are summed on the device and all-reduced over ranks
        without waiting: :class:`StepResult` reads them when asked."""
        started = time.monotonic()
        lr = float(self.parts.engine.scheduler.get_last_lr()[0])  # the lr this update applies
        work = self.micro_batches()
        assert work.sums is not None  # accumulation >= 1
        self.state.consumed_samples += self.config.optim.batch_size
        applied = self.count_update()
        counts = self.dist.tensor([len(work.lengths), sum(work.lengths)], work.sums.dtype)
        totals = self.dist.sum(torch.cat([work.sums / self.parts.engine.accumulation, counts]))
        host = {"lr": lr, "skipped_steps": float(self.state.skipped)}
        if self.parts.precision == "fp16":
            host["loss_scale"] = float(getattr(self.engine.optimizer, "cur_scale", 0.0))
        flops = step_flops(self.parts.student.config, work.lengths, work.masked_tokens,
                           self.config.objective.objectives)
        return StepResult(applied, work.keys, totals, self.dist.sum_exact_tensor(work.digest % DIGEST_MODULUS), host,
                          self.dist.world_size, started, self.engine.get_global_grad_norm(), sum(work.lengths), flops,
                          self.parts.peak_flops)

    def micro_batches(self) -> _StepWork:
        """This rank's ``accumulation`` micro-batches of the step through teacher and
        student, backward, and ``engine.step()`` (the update at the boundary): the
        losses summed on the device, and what the host counted of the batches."""
        work = _StepWork()
        for _ in range(self.parts.engine.accumulation):
            try:
                cpu_batch = next(self.parts.batches)
            except DatasetError as err:  # a token id outside the vocabulary: names shard, instance, position
                raise RankError(str(err)) from err
            work.lengths += sequence_lengths(cpu_batch).tolist()
            work.masked_tokens += int(cpu_batch["masked"].sum())
            work.digest += sample_digest(cpu_batch["sample_keys"].numpy())
            # Dropout keyed by the micro-batch's global position: the same on any rank count.
            torch.manual_seed(micro_batch_seed(self.config.seed, cpu_batch["micro_batch"]))
            if self.cuda_graphs:
                new_micro_batch()
            batch = self.dist.move(cpu_batch)
            hidden = None
            if self.parts.teacher is not None:
                teacher_dropout = (micro_batch_seed(self.config.seed, cpu_batch["micro_batch"], stream=1)
                                   if self.config.objective.reference_compat else None)
                hidden = teacher_states(self.parts.teacher, batch, teacher_dropout, self.parts.teacher_fast)
            losses = self.engine(batch, hidden)
            self.engine.backward(losses["loss"])
            self.engine.step()
            work.keys = sorted(losses)
            values = torch.stack([losses[k].detach().float() for k in work.keys])
            work.sums = values if work.sums is None else work.sums + values
        return work

    def count_update(self) -> bool:
        """Whether the engine applied this step's update, counted in the state: an
        applied one advances ``step``, a skipped one (fp16's non-finite gradients)
        ``skipped``; ``--max-skipped-in-a-row`` of those in a row is a divergence."""
        applied = bool(self.engine.was_step_applied())
        if applied:
            self.state.step += 1
            self.skipped_in_a_row = 0
            return True
        self.state.skipped += 1
        self.skipped_in_a_row += 1
        if self.skipped_in_a_row >= self.config.optim.max_skipped_in_a_row:
            raise TrainError(f"{self.skipped_in_a_row} updates in a row skipped for non-finite gradients "
                             f"after step {self.state.step}: the run has diverged")
        return False

    def maybe_evaluate(self) -> None:
        """Every ``--eval-every`` steps (and at the last): the validation split's
        losses and the student's per-layer self-similarity; the initial model's once
        per job."""
        config, step = self.config, self.state.step
        if self.parts.eval_every <= 0 or not (step % self.parts.eval_every == 0 or step == config.optim.steps):
            return
        self.flush_metrics()
        if self.dist.is_main and self.parts.eval_batches:
            if self.parts.teacher is not None and step - self.first_step <= self.parts.eval_every:
                # The initial model (= the teacher) as the reference line.
                initial = layer_self_similarity(self.parts.teacher, self.parts.eval_batches)
                self.parts.metrics.log_scalars("eval_initial", step,
                                         {f"selfsim_layer{k}": v for k, v in enumerate(initial)})
            self.parts.metrics.log_evaluation(step, evaluate(self.engine.module.student, self.parts.teacher,
                                                             self.parts.eval_batches, config.objective))
        self.dist.barrier()

    def maybe_checkpoint(self, force: bool = False) -> None:
        step = self.state.step
        due = step % self.config.checkpoint.save_every == 0 or step == self.last_step
        if (due or force) and step != self.saved_step:
            self.flush_metrics()  # metrics.jsonl holds every step the checkpoint does
            client = self.state.client_state(self.config.optim.batch_size)
            try:
                checkpoint.save(self.engine, self.run.checkpoints, step, client, self.config.checkpoint.keep_last,
                                self.dist)
            except (OSError, RuntimeError) as err:
                raise RankError(self._save_failed(step, err)) from err
            self.saved_step = step

    def _save_failed(self, step: int, err: BaseException) -> str:
        """The one line of a checkpoint that could not be written."""
        where = self.run.checkpoints / checkpoint.tag_for(step)
        newest, _ = checkpoint.newest_verified_tag(self.run.checkpoints)
        kept = (f"the newest complete checkpoint is {self.run.checkpoints / newest} (--resume continues from it)"
                if newest else "there is no complete checkpoint yet")
        return f"{where}: the checkpoint of step {step} could not be written: {describe_write_error(err, where)}; {kept}"

    def preemption_requested(self, every_rank_now: bool = False) -> bool:
        """Whether any rank got SIGUSR1/SIGTERM; if so, checkpoint this step and
        leave the PREEMPTED marker the Slurm job requeues on. Several ranks agree
        in a collective, which waits for the GPU: every ``--log-every`` steps (a
        scheduler's warning comes minutes ahead), every step on one rank, and
        whenever ``every_rank_now`` (all ranks call it at the same point)."""
        if self.dist.world_size > 1 and self.state.step % self.config.log_every and not every_rank_now:
            return False
        if not self.dist.any(self.stop_request.requested):
            return False
        if self.state.step >= self.config.optim.steps:
            return False  # finished anyway
        self.maybe_checkpoint(force=True)
        if self.dist.is_main:
            name = self.stop_request.signal_name or "signal on another rank"
            self.run.preempted_marker.write_text(f"{name} at step {self.state.step}\n")
            print(f"{name}: checkpointed step {self.state.step}, exiting for a requeue", flush=True)
        return True

    def export(self) -> None:
        """Rank 0 writes ``RUN_DIR/export`` from the fp32 master weights of the final
        checkpoint, taken from memory (every rank gathers them) and written while
        the checkpoint is saved: reading the checkpoint back took 20 s for BERT-base,
        most of it DeepSpeed's conversion (``benchmarks/bench_end_of_run.py``)."""
        try:
            # Final: nothing updates them any more. Every rank gathers; rank 0 alone keeps them.
            weights = engine_master_weights(self.engine, keep=self.dist.is_main)
        except Exception:
            # train() left the last step's save to this method: it is made whatever the export does.
            self.maybe_checkpoint(force=True)
            raise
        errors: list[BaseException] = []

        def write() -> None:
            try:
                out = export_weights(weights, self.run.path, self.run.export, managed=True)
                print(f"exported the student to {out}", flush=True)
            except BaseException as err:  # raised again by the training thread below
                errors.append(err)

        writer = threading.Thread(target=write, name="export") if self.dist.is_main else None
        if writer is not None:
            writer.start()
        try:
            self.maybe_checkpoint(force=True)  # the last step's, which train() leaves to this overlap
        except BaseException:
            if writer is not None:
                writer.join()
            for err in errors:  # the checkpoint's failure is raised; the export's is said
                log.error("the export failed as well: %s", err)
            raise
        if writer is not None:
            writer.join()
        if errors:
            raise errors[0]

    def close(self) -> None:
        """Stop the data-loader workers, close the metrics, release the engine and
        leave the process group. Without ``engine.destroy()`` ZeRO's gradient hooks
        keep the engine, its model and its optimizer state alive for as long as
        the process runs (several Trainers in one process would add up)."""
        self.parts.batches = iter(())  # dropping the loader's iterator shuts its worker processes down
        try:
            self.parts.metrics.close()  # its last write may fail (a full disk): the rest is still released
        finally:
            try:
                self.engine.destroy()
            finally:
                if self.parts.lock is not None:
                    self.parts.lock.release()
                self.dist.close()
