"""Several datasets as one: each takes a chosen share of one index space, which the
global shuffle (:mod:`tacl_scale.data.shuffle`) then orders (``--data A B
--data-weights 3 1``)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np


class BlendedDatasets:
    """Several datasets as one index space of ``sum(len)`` instances, each dataset
    taking a share ``weights[d] / sum(weights)`` of it (default: its own size, i.e.
    plain concatenation). A dataset given more than its size repeats, one given less
    contributes a spread-out subset: position ``j`` of dataset ``d``'s share maps to
    instance ``(j · a_d + b_d) mod len(d)`` with ``a_d`` coprime to ``len(d)``, a
    permutation that needs no memory. The global shuffle orders the result."""

    def __init__(self, datasets: Sequence[Any], weights: Sequence[float] | None = None, seed: int = 0) -> None:
        sizes = np.array([len(d) for d in datasets], dtype=np.int64)
        if len(datasets) == 0 or (sizes == 0).any():
            raise ValueError("every blended dataset must hold instances")
        shares = np.asarray(weights if weights is not None else sizes, dtype=np.float64)
        if len(shares) != len(datasets) or (shares <= 0).any():
            raise ValueError(f"need one positive weight per dataset, got {list(shares)}")
        total = int(sizes.sum())
        exact = shares / shares.sum() * total
        counts = np.floor(exact).astype(np.int64)
        # Hand the rounding remainder to the largest fractional parts.
        for d in np.argsort(-(exact - counts), kind="stable")[: total - int(counts.sum())]:
            counts[d] += 1
        self.datasets = list(datasets)
        self.counts = counts
        self.starts = np.concatenate([[0], np.cumsum(counts)])
        rng = np.random.default_rng([seed, 0xB1E])
        self._stride = [_coprime_stride(int(n), rng) for n in sizes]
        self._offset = [int(rng.integers(0, n)) for n in sizes]
        self._identity = weights is None

    def __len__(self) -> int:
        return int(self.starts[-1])

    def locate(self, index: int) -> tuple[int, int]:
        """(dataset, instance within it) of blended position ``index``."""
        d = int(np.searchsorted(self.starts, index, side="right")) - 1
        j = index - int(self.starts[d])
        if self._identity:
            return d, j
        size = len(self.datasets[d])
        return d, (j * self._stride[d] + self._offset[d]) % size

    def __getitem__(self, index: int) -> dict[str, Any]:
        d, j = self.locate(index)
        return self.datasets[d][j]

    def describe(self, index: int) -> str:
        """Where blended position ``index`` is stored (its dataset's ``describe``)."""
        d, j = self.locate(index)
        return self.datasets[d].describe(j)


def _coprime_stride(size: int, rng: np.random.Generator) -> int:
    if size <= 2:
        return 1
    while True:
        candidate = int(rng.integers(size // 3 + 1, size))
        if math.gcd(candidate, size) == 1:
            return candidate
