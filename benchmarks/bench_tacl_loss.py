"""Fused Triton TaCL loss vs the PyTorch reference, forward + backward, at the
paper's shapes (B=32 per GPU, L=256, 15% masked; D=768 base, D=1024 large).

    python benchmarks/bench_tacl_loss.py [--iters 50]

Needs a CUDA device (on CPU the Triton kernel only runs in the interpreter, whose
speed means nothing). Prints time per fwd+bwd and the peak memory allocated beyond
the inputs, for each implementation, and the ratio. Both get the batch's
``MaskedRows`` as training passes them (the reference does not use them).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from tacl_scale.config import ObjectiveConfig  # noqa: E402
from tacl_scale.kernels import tacl_loss  # noqa: E402

TAU = ObjectiveConfig().temperature  # the paper's


def measure(impl: str, batch: int, length: int, dim: int, dtype: torch.dtype, iters: int,
            device: str = "cuda") -> tuple[float, float | None]:
    """(ms per forward+backward, peak MiB allocated beyond the inputs; None off
    CUDA) of one implementation on a random padded batch, 15% of it masked, with
    the collate's MaskedRows as training passes them."""
    from tacl_scale.kernels.rows import padded_rows

    g = torch.Generator(device=device).manual_seed(0)
    student = torch.randn(batch, length, dim, device=device, dtype=dtype, generator=g, requires_grad=True)
    teacher = torch.randn(batch, length, dim, device=device, dtype=torch.float16 if device == "cuda" else dtype,
                          generator=g)
    attention = torch.ones(batch, length, device=device, dtype=torch.long)
    masked = torch.rand(batch, length, device=device, generator=g) < 0.15
    rows = padded_rows(masked, attention)

    def step() -> None:
        student.grad = None
        tacl_loss(student, teacher, masked, attention, TAU, impl=impl, rows=rows)[0].backward()

    for _ in range(3):
        step()
    if device != "cuda":
        start = time.perf_counter()
        for _ in range(iters):
            step()
        return 1000 * (time.perf_counter() - start) / iters, None
    torch.cuda.synchronize()
    base = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(iters):
        step()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / iters, (torch.cuda.max_memory_allocated() - base) / 2**20


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--iters", type=int, default=50)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--length", type=int, default=256)
    args = p.parse_args()
    if not torch.cuda.is_available():
        print("no CUDA device: this benchmark compares GPU kernels; run it on a GPU machine")
        return 2
    print(f"device {torch.cuda.get_device_name()}, torch {torch.__version__}, B={args.batch} L={args.length}, "
          "15% masked, student fp16 / teacher fp16, fwd+bwd")
    print(f"{'D':>5} {'torch ms':>9} {'triton ms':>10} {'speed-up':>9} {'torch extra MiB':>16} {'triton extra MiB':>17}")
    for dim in (768, 1024):
        ref_ms, ref_mem = measure("torch", args.batch, args.length, dim, torch.float16, args.iters)
        tri_ms, tri_mem = measure("triton", args.batch, args.length, dim, torch.float16, args.iters)
        print(f"{dim:>5} {ref_ms:>9.3f} {tri_ms:>10.3f} {ref_ms / tri_ms:>8.2f}x {ref_mem:>16.1f} {tri_mem:>17.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
