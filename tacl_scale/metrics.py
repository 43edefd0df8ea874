"""Rank 0's record of a training run: ``metrics.jsonl`` (one object per applied
step, plus ``event`` objects: skipped updates, held-out evaluations), TensorBoard scalars and the
progress line on stdout. On other ranks every method does nothing."""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from .files import atomic_write
from .run_dir import RunDir

PROGRESS_KEYS = ("loss", "tacl", "mlm", "nsp", "mirror", "mirror_acc")


def _lines_and_records(path: Path) -> Iterator[tuple[str, dict[str, Any]]]:
    """Each line of ``metrics.jsonl`` that holds a record, and the record; a
    damaged line is left out: cut by a kill, zeros or other bytes after a crash
    (bytes that are not UTF-8 among them), never the lines around it."""
    for raw in path.read_bytes().split(b"\n"):
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            continue  # bytes that are no text (json.dumps writes ASCII)
        for line in text.splitlines():
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except ValueError:
                continue  # a line cut by a kill
            if isinstance(record, dict):
                yield line, record


def read_records(path: str | os.PathLike) -> list[dict[str, Any]]:
    """The records of a ``metrics.jsonl`` in the order they were logged: one per
    applied step (``"step"``) and the events (``"event"``: skipped updates,
    held-out evaluations); a line cut by a kill (or otherwise damaged) is left out."""
    return [record for _, record in _lines_and_records(Path(path))]


def step_records(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The applied steps' records of :func:`read_records`, without the events."""
    return [record for record in records if "step" in record]


def drop_after(path: Path, step: int) -> None:
    """Rewrite ``metrics.jsonl`` without what was logged after ``step``: a job
    resumed from the checkpoint of ``step`` trains those steps again, and logs them."""
    kept = []
    for line, entry in _lines_and_records(path):
        # An applied step or an evaluation up to the checkpoint's step stays; what was
        # logged after it (a skipped update *after* step N included) happens again.
        if "step" in entry or "at_step" in entry:
            keep = (entry["step"] if "step" in entry else entry["at_step"]) <= step
        else:
            keep = entry.get("after_step", 0) < step
        if keep:
            kept.append(line)
    atomic_write(path, "".join(f"{line}\n" for line in kept))


def _shown_losses(values: dict[str, float]) -> str:
    """The console's losses of a step or an evaluation: PROGRESS_KEYS present in ``values``."""
    return "  ".join(f"{k} {values[k]:.4f}" for k in PROGRESS_KEYS if k in values)


class MetricsLogger:
    """A job's progress: the console line every --log-every steps, metrics.jsonl
    and TensorBoard (rank 0 only: ``enabled``)."""

    def __init__(self, run: RunDir, enabled: bool, total_steps: int, log_every: int, first_step: int,
                 job_end: int | None = None) -> None:
        self.enabled = enabled
        self.total_steps = total_steps
        self.job_end = total_steps if job_end is None else job_end  # --stop-after-steps ends a job before the run
        self.log_every = max(1, log_every)
        self.first_step = first_step
        self.started = time.monotonic()
        self.history: list[dict[str, float]] = []
        self._writer: Any = None
        self._file: Any = None
        if enabled:
            from torch.utils.tensorboard import SummaryWriter

            path = run.metrics_file
            if path.is_file():
                drop_after(path, first_step)
            # purge_step: TensorBoard drops what an earlier job logged from this step on.
            self._writer = SummaryWriter(str(run.tensorboard), purge_step=first_step + 1 if first_step else None)
            self._file = open(path, "a", encoding="utf-8")

    def log_step(self, step: int, values: dict[str, float], record_only: dict[str, Any] | None = None) -> None:
        """The metrics of applied step ``step``: JSONL, ``train/*`` scalars, and the
        progress line every ``log_every`` steps, at the job's last and the run's. ``record_only``
        values (audit fields such as the sample digest) go to the JSONL alone."""
        if not self.enabled:
            return
        record = {"step": step, **values, **(record_only or {})}
        self.history.append(record)
        self._write(record)
        for key, value in values.items():
            self._writer.add_scalar(f"train/{key}", value, step)
        if step % self.log_every == 0 or step in (self.total_steps, self.job_end):
            rate = (step - self.first_step) / max(time.monotonic() - self.started, 1e-9)
            eta = (self.total_steps - step) / max(rate, 1e-9)
            shown = _shown_losses(values)
            extra = f"  mfu {values['mfu']:.1%}" if "mfu" in values else ""
            print(f"step {step}/{self.total_steps}  {shown}  lr {values['lr']:.2e}  "
                  f"{values['samples_per_s']:.1f} samples/s{extra}  ETA {eta:.0f}s", flush=True)

    def log_skipped(self, after_step: int, skipped_total: int, loss_scale: float | None) -> None:
        """An update that was not applied (non-finite gradients; fp16 lowers its
        loss scale and retries with the next batch)."""
        if not self.enabled:
            return
        event = {"event": "skipped_update", "after_step": after_step, "skipped_steps": skipped_total}
        scale = ""
        if loss_scale is not None:
            event["loss_scale"] = loss_scale
            scale = f", loss scale now {loss_scale:g}"
        self._write(event)
        self._writer.add_scalar("train/skipped_steps", skipped_total, after_step)
        print(f"update after step {after_step} skipped: non-finite gradients{scale} "
              f"({skipped_total} skipped so far)", flush=True)

    def log_scalars(self, prefix: str, step: int, values: dict[str, float]) -> None:
        """Other scalars (held-out evaluation), measured at ``step``: TensorBoard's
        ``prefix/*`` and a JSONL event ``{"event": prefix, "at_step": step, ...}``
        (``at_step``, not ``step``: a reader's applied steps stay the records with ``step``)."""
        if not self.enabled:
            return
        self._write({"event": prefix, "at_step": step, **values})
        for key, value in values.items():
            self._writer.add_scalar(f"{prefix}/{key}", value, step)

    def log_evaluation(self, step: int, values: dict[str, float]) -> None:
        """A held-out evaluation at ``step``, as :meth:`log_scalars` logs ``eval``,
        and one console line (its losses and the last layer's self-similarity): a
        user watching the console saw no sign that it ran."""
        self.log_scalars("eval", step, values)
        if not self.enabled:
            return
        shown = f"  {losses}" if (losses := _shown_losses(values)) else ""
        layers = sorted((int(k.removeprefix("selfsim_layer")), v) for k, v in values.items()
                        if k.startswith("selfsim_layer"))
        last = f"  self-similarity of layer {layers[-1][0]} {layers[-1][1]:.4f}" if layers else ""
        print(f"eval at step {step}{shown}{last}", flush=True)

    def _write(self, record: dict[str, Any]) -> None:
        with naming(self._file.name):
            self._file.write(json.dumps(record) + "\n")
            self._file.flush()

    def close(self) -> None:
        """Close the JSONL and TensorBoard files (both, even when one fails)."""
        writer, file, self._writer, self._file = self._writer, self._file, None, None
        try:
            if writer is not None:
                with naming(writer.get_logdir()):
                    writer.close()
        finally:
            if file is not None:
                with naming(file.name):
                    file.close()


@contextlib.contextmanager
def naming(path: str) -> Iterator[None]:
    """An OSError of the block with ``path`` as its file name (a write to an open
    file names none), so the error line says which file the disk refused."""
    try:
        yield
    except OSError as err:
        if err.filename is not None:
            raise
        raise OSError(err.errno, err.strerror or str(err), str(path)) from err
