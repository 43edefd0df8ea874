"""End-to-end training throughput on one GPU: the real ``Trainer`` step (DeepSpeed
engine, bf16, fused AdamW, frozen teacher, TaCL + MLM + NSP) at BERT-base shape on
real instances (length 256), padded and unpadded, ZeRO-2 and ZeRO-1, over
micro-batch sizes at the paper's global batch of 256.

    python benchmarks/bench_train_gpu.py --data DATASET [--micro 256 64] [--steps 8] [--out rows.jsonl]

Each configuration reports real tokens/s, step time, the teacher's share of the
step (its forward timed alone on the same micro-batches), peak memory, and model
FLOPs utilisation (``tacl_scale.flops.mfu``: model FLOPs ÷ time ÷ the GPU's
datasheet dense peak) of the student's forward+backward and the teacher's forward,
separately and together. Only real tokens count as model FLOPs, so padding shows up
as lower utilisation. Configurations run one after the other in this process; each
Trainer is closed (its engine destroyed) before the next is built, so peak memory
is each one's own, and each row is printed and appended to ``--out`` as soon as it
is measured. ``scripts/gpu_check.sh`` runs it on a GPU machine; ``--dry-run`` runs
the same code on the CPU at a tiny shape (for checking the benchmark, not for
figures).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import random
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from tacl_scale.flops import mfu, peak_flops  # noqa: E402

BERT_BASE = {"vocab_size": 30522, "hidden_size": 768, "num_hidden_layers": 12, "num_attention_heads": 12,
             "intermediate_size": 3072, "max_position_embeddings": 512}
# The dry run's model: BERT-base's vocabulary and positions, a tiny encoder.
TINY_BERT = {**BERT_BASE, "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 2,
             "intermediate_size": 128}


@dataclass(frozen=True)
class Setup:
    """One configuration of the sweep."""

    ds_config: str  # a file of ds_configs/
    micro_batch: int
    unpad: bool
    batch_size: int = 256

    @property
    def name(self) -> str:
        zero = "ZeRO-1" if "zero1" in self.ds_config else "ZeRO-2"
        return f"{zero} {'unpadded' if self.unpad else 'padded'} micro {self.micro_batch}"


def sweep_setups(micro_sizes: list[int], zero1: bool = True, batch_size: int = 256) -> list[Setup]:
    """The sweep, most telling first (a sweep cut short by its time budget keeps
    those): unpadded and padded ZeRO-2 at the first micro-batch size, ZeRO-1 beside
    it, then the other sizes."""
    first, *others = micro_sizes
    setups = [Setup("zero2_bf16.json", first, True, batch_size), Setup("zero2_bf16.json", first, False, batch_size)]
    if zero1:
        setups.append(Setup("zero1_bf16.json", first, True, batch_size))
    for micro in others:
        setups += [Setup("zero2_bf16.json", micro, True, batch_size), Setup("zero2_bf16.json", micro, False, batch_size)]
    return setups


def utilisation(per_step: dict[str, float], step_s: float, teacher_s: float, peak: float | None) -> dict:
    """MFU of the whole step, of the student (the step without the teacher's
    forward) and of the teacher (its forward alone); ``None`` on a device whose
    datasheet peak is unknown."""
    if peak is None:
        return {"mfu": None, "mfu_student": None, "mfu_teacher": None}
    return {"mfu": mfu(per_step["total"], step_s, peak),
            "mfu_student": mfu(per_step["student"], max(step_s - teacher_s, 1e-9), peak),
            "mfu_teacher": mfu(per_step["teacher"], teacher_s, peak) if teacher_s > 0 else None}


def measure_matmul_tflops(size: int = 8192, iters: int = 10) -> float:
    """A dense bf16 matmul's rate on this GPU (TFLOP/s): printed beside the MFU for
    reference, never its denominator."""
    a = torch.randn(size, size, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(size, size, device="cuda", dtype=torch.bfloat16)
    for _ in range(3):
        a @ b
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(iters):
        a @ b
    torch.cuda.synchronize()
    return 2 * size**3 * iters / (time.perf_counter() - start) / 1e12


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def build_trainer(data: Path, model: Path, workdir: Path, setup: Setup, workers: int = 6):
    """The real ``Trainer`` for ``setup`` on one device (rank 0 of 1)."""
    from tacl_scale.config import (
        CheckpointConfig,
        DataConfig,
        EngineConfig,
        OptimConfig,
        PerformanceConfig,
        TrainConfig,
    )
    from tacl_scale.distributed import Distributed, LaunchEnv
    from tacl_scale.trainer import Trainer

    os.environ.update(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1",
                      MASTER_PORT=str(random.randint(20000, 40000)))
    config = TrainConfig(
        model=str(model), output=str(workdir / setup.name.replace(" ", "-")),
        engine=EngineConfig.from_file(ROOT / "ds_configs" / setup.ds_config),
        data=DataConfig((str(data),), num_workers=workers),
        optim=OptimConfig(steps=10**6, batch_size=setup.batch_size, micro_batch_size=setup.micro_batch),
        checkpoint=CheckpointConfig(save_every=10**9), performance=PerformanceConfig(unpad=setup.unpad),
        eval_every=0, export=False, log_every=10**9,
    )
    return Trainer.build(config, Distributed.setup(LaunchEnv.from_environ(os.environ)))


def run_config(data: Path, model: Path, workdir: Path, setup: Setup, steps: int, warmup: int,
               workers: int = 6) -> dict:
    """Build a Trainer for ``setup``, time ``steps`` steps after ``warmup``, then
    the teacher alone on the next micro-batches; close the Trainer."""
    from tacl_scale.model import teacher_states

    if torch.cuda.is_available():
        torch.cuda.reset_peak_memory_stats()
    trainer = build_trainer(data, model, workdir, setup, workers)
    try:
        device = trainer.device
        for _ in range(warmup):
            trainer.train_step()
        _sync(device)
        start = time.perf_counter()
        tokens, flops = 0, {"student": 0.0, "teacher": 0.0, "total": 0.0}
        losses = []
        for _ in range(steps):
            result = trainer.train_step()
            tokens += result.tokens
            losses.append(result.metrics["loss"])
            for key in flops:
                flops[key] += result.flops[key]
        _sync(device)
        step_s = (time.perf_counter() - start) / steps
        batches = [trainer.dist.move(next(trainer.batches)) for _ in range(trainer.accumulation)]
        for batch in batches:  # warm
            teacher_states(trainer.teacher, batch)
        _sync(device)
        start = time.perf_counter()
        for batch in batches:
            teacher_states(trainer.teacher, batch)
        _sync(device)
        teacher_s = time.perf_counter() - start
        peak = peak_flops(torch.cuda.get_device_name(device)) if device.type == "cuda" else None
        per_step = {k: v / steps for k, v in flops.items()}
        return {
            "name": setup.name, "ds_config": setup.ds_config, "zero_stage": trainer.engine.zero_optimization_stage(),
            "micro_batch": setup.micro_batch, "unpad": trainer.unpad, "accumulation": trainer.accumulation,
            "step_ms": 1000 * step_s, "tokens_per_s": tokens / steps / step_s, "teacher_share": teacher_s / step_s,
            **utilisation(per_step, step_s, teacher_s, peak),
            "peak_mem_gib": torch.cuda.max_memory_allocated(device) / 2**30 if device.type == "cuda" else None,
            "loss_first": losses[0], "loss_last": losses[-1],
        }
    finally:
        trainer.close()


def sweep(data: Path, setups: list[Setup], steps: int, warmup: int, out: Path | None = None,
          model_config: dict | None = None, workers: int = 6) -> list[dict]:
    """Every setup in turn; a failed one (out of memory, an error) is a row with
    its error, and the sweep goes on. Rows are appended to ``out`` (JSON lines) as
    they come."""
    rows = []
    with tempfile.TemporaryDirectory(prefix="tacl-bench-") as tmp:
        workdir = Path(tmp)
        model = workdir / "bert.json"
        model.write_text(json.dumps(model_config or BERT_BASE))
        for setup in setups:
            try:
                row = run_config(data, model, workdir, setup, steps, warmup, workers)
            except Exception as err:  # one configuration's failure must not hide the others
                row = {"name": setup.name, "ds_config": setup.ds_config, "micro_batch": setup.micro_batch,
                       "unpad": setup.unpad, "error": f"{type(err).__name__}: {err}"[:300]}
            gc.collect()
            if torch.cuda.is_available():
                torch.cuda.empty_cache()
            rows.append(row)
            print(json.dumps(row), flush=True)
            if out is not None:
                with open(out, "a", encoding="utf-8") as f:
                    f.write(json.dumps(row) + "\n")
    return rows


def best(rows: list[dict], unpad: bool, ds_config: str = "zero2_bf16.json") -> dict | None:
    done = [r for r in rows if r.get("unpad") is unpad and r.get("ds_config") == ds_config and "error" not in r]
    return max(done, key=lambda r: r["tokens_per_s"]) if done else None


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", type=Path, required=True, help="dataset directory (max length 256, BERT vocabulary)")
    p.add_argument("--micro", type=int, nargs="+", default=[256, 64])
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--no-zero1", action="store_true", help="ZeRO-2 only")
    p.add_argument("--out", type=Path, default=None, help="append each row to this JSON-lines file")
    p.add_argument("--dry-run", action="store_true", help="on the CPU at a tiny shape: checks the code, no figures")
    args = p.parse_args()
    if args.dry_run:
        setups = sweep_setups([2], zero1=not args.no_zero1, batch_size=4)
        sweep(args.data, setups, 2, 1, args.out, TINY_BERT, workers=0)
        return 0
    if not torch.cuda.is_available():
        print("no CUDA device: this benchmark measures GPU training; run it on a GPU machine", file=sys.stderr)
        return 2
    name = torch.cuda.get_device_name()
    datasheet = peak_flops(name)
    print(f"{name}: MFU against the datasheet dense bf16 peak "
          f"{'unknown' if datasheet is None else f'{datasheet / 1e12:.0f} TFLOP/s'}; "
          f"a bf16 matmul measures {measure_matmul_tflops():.0f} TFLOP/s (reference)")
    rows = sweep(args.data, sweep_setups(args.micro, zero1=not args.no_zero1), args.steps, args.warmup, args.out)
    for row in rows:
        if "error" not in row:
            mfu_text = "n/a" if row["mfu"] is None else f"{row['mfu']:.1%}"
            print(f"{row['name']:>32}: {row['tokens_per_s']:,.0f} tokens/s, MFU {mfu_text}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
