"""Epoch start of the global order: time and memory to begin an epoch and draw
its first global batch, from N = 10^6 to 10^9 instances, for tacl-scale's keyed
Feistel permutation and, side by side, the array permutation it replaced
(``numpy.random.default_rng(...).permutation(N)``, measured up to ``--array-max``).

    python benchmarks/bench_shuffle.py [--batch 256] [--array-max 100000000]
"""

from __future__ import annotations

import argparse
import sys
import time
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

from tacl_scale.data.shuffle import GlobalOrder  # noqa: E402


def measure(start_epoch) -> tuple[float, float]:  # type: ignore[no-untyped-def]
    tracemalloc.start()
    began = time.perf_counter()
    start_epoch()
    elapsed = time.perf_counter() - began
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return elapsed * 1e3, peak / 2**20


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--array-max", type=int, default=10**8)
    args = p.parse_args()
    GlobalOrder(1000, 0).instances(np.arange(args.batch))  # warm-up: first use of numpy's seeding
    print(f"{'N':>14} {'Feistel ms':>11} {'Feistel MiB':>12} {'array ms':>10} {'array MiB':>10}")
    for exponent in range(6, 10):
        n = 10**exponent
        epoch_start = n * 3  # the first batch of epoch 3
        positions = np.arange(epoch_start, epoch_start + args.batch)
        feistel_ms, feistel_mib = measure(lambda n=n, positions=positions: GlobalOrder(n, 1234).instances(positions))
        row = f"{n:>14,} {feistel_ms:>11.2f} {feistel_mib:>12.3f}"
        if n <= args.array_max:
            array_ms, array_mib = measure(lambda n=n: np.random.default_rng([1234, 3]).permutation(n)[: args.batch])
            row += f" {array_ms:>10.1f} {array_mib:>10.1f}"
        else:
            row += f" {'-':>10} {'-':>10}"
        print(row)
    return 0


if __name__ == "__main__":
    sys.exit(main())
