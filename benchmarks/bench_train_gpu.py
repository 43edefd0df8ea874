"""End-to-end training throughput on one GPU: the real ``Trainer`` step (DeepSpeed
ZeRO-2 engine, bf16, fused AdamW, frozen teacher, TaCL + MLM + NSP) at BERT-base
shape on real instances (length 256), padded and unpadded, over several
micro-batch sizes at the paper's global batch of 256.

    python benchmarks/bench_train_gpu.py --data DATASET [--micro 32 64 128] [--steps 8]

For each configuration it reports real tokens/s, step time, the teacher's share of
the step (its forward timed alone on the same number of micro-batches), and model
FLOPs utilisation against ``--peak-tflops`` (default: a measured bf16 matmul):
student forward+backward and teacher forward separately and together. Only real
tokens count as model FLOPs (``tacl_scale.flops``), so padding shows up as lower
utilisation. Needs CUDA; run through ``scripts/gpu_check.sh`` on a GPU machine.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

BERT_BASE = {"vocab_size": 30522, "hidden_size": 768, "num_hidden_layers": 12, "num_attention_heads": 12,
             "intermediate_size": 3072, "max_position_embeddings": 512}


def measure_peak_tflops(size: int = 8192, iters: int = 10) -> float:
    """Dense bf16 matmul rate of this GPU (TFLOP/s), the ceiling MFU is taken against."""
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


def run_config(data: Path, model: Path, workdir: Path, micro: int, unpad: bool, steps: int, warmup: int,
               peak_tflops: float, ds_config: str = "zero2_bf16.json", workers: int = 6) -> dict:
    """Build a Trainer for one configuration, time ``steps`` steps after
    ``warmup``, then time the teacher alone; the process group is left at the end."""
    from tacl_scale.config import (
        CheckpointConfig,
        DataConfig,
        EngineConfig,
        OptimConfig,
        PerformanceConfig,
        TrainConfig,
    )
    from tacl_scale.distributed import Distributed, LaunchEnv
    from tacl_scale.model import teacher_states
    from tacl_scale.trainer import Trainer

    os.environ.update(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1",
                      MASTER_PORT=str(random.randint(20000, 40000)))
    config = TrainConfig(
        model=str(model), output=str(workdir / f"run-{micro}-{'unpad' if unpad else 'pad'}"),
        engine=EngineConfig.from_file(ROOT / "ds_configs" / ds_config), data=DataConfig((str(data),),
                                                                                        num_workers=workers),
        optim=OptimConfig(steps=10**6, batch_size=256, micro_batch_size=micro),
        checkpoint=CheckpointConfig(save_every=10**9), performance=PerformanceConfig(unpad=unpad),
        eval_every=0, export=False, log_every=10**9,
    )
    torch.cuda.reset_peak_memory_stats()
    trainer = Trainer(config, Distributed.setup(LaunchEnv.from_environ(os.environ)))
    try:
        for _ in range(warmup):
            trainer.train_step()
        torch.cuda.synchronize()
        start = time.perf_counter()
        tokens, flops = 0, {"student": 0.0, "teacher": 0.0, "total": 0.0}
        losses = []
        for _ in range(steps):
            result = trainer.train_step()
            tokens += result.tokens
            losses.append(result.metrics["loss"])
            for key in flops:
                flops[key] += result.flops[key]
        torch.cuda.synchronize()
        step_s = (time.perf_counter() - start) / steps
        batches = [trainer.dist.move(next(trainer.batches)) for _ in range(trainer.accumulation)]
        for batch in batches:  # warm
            teacher_states(trainer.teacher, batch)
        torch.cuda.synchronize()
        start = time.perf_counter()
        for batch in batches:
            teacher_states(trainer.teacher, batch)
        torch.cuda.synchronize()
        teacher_s = time.perf_counter() - start
        peak = peak_tflops * 1e12
        per_step = {k: v / steps for k, v in flops.items()}
        return {
            "micro_batch": micro, "unpad": unpad, "accumulation": trainer.accumulation,
            "step_ms": 1000 * step_s, "tokens_per_s": tokens / steps / step_s,
            "teacher_share": teacher_s / step_s,
            "mfu": per_step["total"] / step_s / peak,
            "mfu_student": per_step["student"] / max(step_s - teacher_s, 1e-9) / peak,
            "mfu_teacher": per_step["teacher"] / teacher_s / peak,
            "peak_mem_gib": torch.cuda.max_memory_allocated() / 2**30,
            "loss_first": losses[0], "loss_last": losses[-1],
        }
    finally:
        trainer.close()


def sweep(data: Path, micro_sizes: list[int], steps: int, warmup: int, peak_tflops: float) -> list[dict]:
    rows = []
    with tempfile.TemporaryDirectory(prefix="tacl-bench-") as tmp:
        workdir = Path(tmp)
        model = workdir / "bert-base.json"
        model.write_text(json.dumps(BERT_BASE))
        for unpad in (False, True):
            for micro in micro_sizes:
                try:
                    rows.append(run_config(data, model, workdir, micro, unpad, steps, warmup, peak_tflops))
                except torch.cuda.OutOfMemoryError as err:
                    rows.append({"micro_batch": micro, "unpad": unpad, "error": f"out of memory: {err}"[:200]})
                    torch.cuda.empty_cache()
                print(json.dumps(rows[-1]), flush=True)
    return rows


def best(rows: list[dict], unpad: bool) -> dict | None:
    done = [r for r in rows if r.get("unpad") is unpad and "error" not in r]
    return max(done, key=lambda r: r["tokens_per_s"]) if done else None


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", type=Path, required=True, help="dataset directory (max length 256, BERT vocabulary)")
    p.add_argument("--micro", type=int, nargs="+", default=[32, 64, 128])
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--peak-tflops", type=float, default=None, help="default: measured bf16 matmul rate")
    args = p.parse_args()
    if not torch.cuda.is_available():
        print("no CUDA device: this benchmark measures GPU training; run it on a GPU machine")
        return 2
    peak = args.peak_tflops or measure_peak_tflops()
    print(f"{torch.cuda.get_device_name()}: dense bf16 peak {peak:.0f} TFLOP/s")
    rows = sweep(args.data, args.micro, args.steps, args.warmup, peak)
    for unpad in (False, True):
        r = best(rows, unpad)
        if r:
            print(f"{'unpadded' if unpad else 'padded':>9}: micro-batch {r['micro_batch']}, "
                  f"{r['tokens_per_s']:,.0f} tokens/s, MFU {r['mfu']:.1%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
