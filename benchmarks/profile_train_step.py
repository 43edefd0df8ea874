"""Where a training step's time goes on one GPU: the real ``Trainer`` (as
``bench_train_gpu.py`` builds it), its micro-batch parts timed one by one, then
``torch.profiler`` over whole steps.

    python benchmarks/profile_train_step.py --data DATASET [--setup zero2_bf16.json:64:unpad ...] [--out DIR]

For each setup (``DS_CONFIG:MICRO_BATCH:unpad|pad``) it prints

* the loader alone: milliseconds per micro-batch that ``next()`` takes when nothing
  else runs (the rate the input pipeline can sustain);
* the parts of a micro-batch, each ended by a device synchronisation (which adds
  a little to each, so their sum exceeds an unsynchronised step): next batch, move
  to the device, teacher forward, student forward, backward, ``engine.step()``;
* the profiler's top operations by device time and by host time over
  ``--profile-steps`` steps (also written to ``DIR/profile-<setup>.txt``).

Figures come from a GPU; ``--dry-run`` runs the same code on the CPU at a tiny shape
(a check of this script, not figures).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import torch  # noqa: E402
from bench_train_gpu import BERT_BASE, TINY_BERT, Setup, build_trainer  # noqa: E402

PARTS = ("next", "move", "teacher", "forward", "backward", "step")


def parse_setup(text: str, batch_size: int) -> Setup:
    """``zero2_bf16.json:64:unpad`` → a Setup."""
    try:
        ds_config, micro, layout = text.split(":")
        if layout not in ("unpad", "pad"):
            raise ValueError(layout)
        return Setup(ds_config, int(micro), layout == "unpad", batch_size)
    except ValueError:
        raise SystemExit(f"error: --setup {text}: expected DS_CONFIG:MICRO_BATCH:unpad|pad") from None


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def loader_ms(trainer, micro_batches: int) -> float:
    """Milliseconds per micro-batch that the loader alone delivers."""
    start = time.perf_counter()
    for _ in range(micro_batches):
        next(trainer.parts.batches)
    return 1000 * (time.perf_counter() - start) / micro_batches


def part_times(trainer, steps: int) -> dict[str, float]:
    """Milliseconds per step spent in each part of the micro-batches, each part
    ended by a synchronisation (the order of ``Trainer.train_step``)."""
    from tacl_scale.model import teacher_states

    device = trainer.dist.device
    totals: dict[str, float] = defaultdict(float)
    for _ in range(steps):
        for _ in range(trainer.parts.engine.accumulation):
            marks = [time.perf_counter()]
            cpu_batch = next(trainer.parts.batches)
            marks.append(time.perf_counter())
            batch = trainer.dist.move(cpu_batch)
            sync(device)
            marks.append(time.perf_counter())
            hidden = (teacher_states(trainer.parts.teacher, batch, fast=trainer.parts.teacher_fast)
                      if trainer.parts.teacher is not None else None)  # compiled, as train_step runs it
            sync(device)
            marks.append(time.perf_counter())
            parts = trainer.engine(batch, hidden)
            sync(device)
            marks.append(time.perf_counter())
            trainer.engine.backward(parts["loss"])
            sync(device)
            marks.append(time.perf_counter())
            trainer.engine.step()
            sync(device)
            marks.append(time.perf_counter())
            for name, begin, end in zip(PARTS, marks[:-1], marks[1:], strict=True):
                totals[name] += 1000 * (end - begin) / steps
    return dict(totals)


def profile_steps(trainer, steps: int, rows: int) -> str:
    """The profiler's tables (top ``rows`` operations by self device time and by
    self host time) over ``steps`` whole training steps."""
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if trainer.dist.device.type == "cuda" else [])
    with profile(activities=activities) as prof:
        for _ in range(steps):
            trainer.train_step()
        sync(trainer.dist.device)
    averages = prof.key_averages()
    tables = []
    if trainer.dist.device.type == "cuda":
        tables.append(averages.table(sort_by="self_cuda_time_total", row_limit=rows))
    tables.append(averages.table(sort_by="self_cpu_time_total", row_limit=rows))
    return "\n".join(tables)


def profile_setup(data: Path, model: Path, workdir: Path, setup: Setup, args: argparse.Namespace) -> dict:
    trainer = build_trainer(data, model, workdir, setup, args.workers)
    try:
        for _ in range(args.warmup):
            trainer.train_step()
        sync(trainer.dist.device)
        start = time.perf_counter()
        for _ in range(args.steps):
            trainer.train_step()
        sync(trainer.dist.device)
        step_ms = 1000 * (time.perf_counter() - start) / args.steps
        row = {"name": setup.name, "accumulation": trainer.parts.engine.accumulation, "step_ms": step_ms,
               "loader_ms_per_micro_batch": loader_ms(trainer, 4 * trainer.parts.engine.accumulation),
               "parts_ms_per_step": part_times(trainer, args.steps)}
        tables = profile_steps(trainer, args.profile_steps, args.rows)
    finally:
        trainer.close()
    print(json.dumps(row), flush=True)
    print(tables, flush=True)
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        text = json.dumps(row, indent=2) + "\n\n" + tables + "\n"
        (args.out / f"profile-{setup.name.replace(' ', '-')}.txt").write_text(text, encoding="utf-8")
    return row


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", type=Path, required=True, help="dataset directory (max length 256, BERT vocabulary)")
    p.add_argument("--setup", action="append", default=[], metavar="DS_CONFIG:MICRO:unpad|pad",
                   help="a configuration to profile (repeatable; default zero2_bf16.json:64:unpad and "
                        "zero1_bf16.json:64:unpad)")
    p.add_argument("--batch-size", type=int, default=256)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--steps", type=int, default=2, help="steps timed whole, then timed by parts")
    p.add_argument("--profile-steps", type=int, default=2)
    p.add_argument("--rows", type=int, default=25, help="operations per profiler table")
    p.add_argument("--workers", type=int, default=6, help="loader worker processes")
    p.add_argument("--out", type=Path, default=None, help="write profile-<setup>.txt files here")
    p.add_argument("--dry-run", action="store_true", help="on the CPU at a tiny shape: checks the code, no figures")
    args = p.parse_args()
    texts = args.setup or ["zero2_bf16.json:64:unpad", "zero1_bf16.json:64:unpad"]
    if args.dry_run:
        args.batch_size, args.workers = 4, 0
        texts = [t.replace(":64:", ":2:") for t in texts]
    elif not torch.cuda.is_available():
        print("no CUDA device: this profiles GPU training; run it on a GPU machine (or --dry-run)", file=sys.stderr)
        return 2
    setups = [parse_setup(t, args.batch_size) for t in texts]
    with tempfile.TemporaryDirectory(prefix="tacl-profile-") as tmp:
        workdir = Path(tmp)
        model = workdir / "bert.json"
        model.write_text(json.dumps(TINY_BERT if args.dry_run else BERT_BASE))
        for setup in setups:
            profile_setup(args.data, model, workdir, setup, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
