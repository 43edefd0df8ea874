"""The global training order: a seeded permutation of each epoch evaluated per
position, in O(1) memory.

An epoch's order is a keyed bijection of ``[0, N)``: a balanced Feistel network on
the smallest domain of ``2^(2h) ≥ N`` values, with *cycle-walking* (re-encrypt
until the value falls inside ``[0, N)``) so that it stays a bijection of ``[0, N)``
itself. Nothing of size N is ever built, so starting an epoch costs the same for a
thousand instances as for a billion, and every rank can evaluate any position.

The training stream is the concatenation of these epochs; global position ``p``
(the number of samples consumed before it, Megatron's ``consumed_samples``) is
instance ``permutation(epoch = p // N)(p % N)``. Nothing here depends on the number
of ranks: :func:`micro_batch_positions` only decides which rank takes which
micro-batch of a step.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

ROUNDS = 6


def _mix(values: np.ndarray, key: np.uint64) -> np.ndarray:
    """The Feistel round function: SplitMix64's finaliser of ``values ^ key``."""
    z = values ^ key
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


class FeistelPermutation:
    """A seeded bijection of ``[0, size)``; ``permutation(positions)`` maps an array
    of positions to instances and :meth:`inverse` maps them back."""

    def __init__(self, size: int, seed: int, epoch: int = 0) -> None:
        if size < 1:
            raise ValueError(f"cannot permute {size} elements")
        self.size = size
        bits = max(2, int(size - 1).bit_length())
        self.half = (bits + 1) // 2
        self._half = np.uint64(self.half)
        self._low = np.uint64((1 << self.half) - 1)
        state = np.random.SeedSequence([seed, epoch, 0xFE15]).generate_state(ROUNDS, dtype=np.uint64)
        self._keys = [np.uint64(k) for k in state]

    def _encrypt(self, x: np.ndarray) -> np.ndarray:
        left, right = x >> self._half, x & self._low
        for key in self._keys:
            left, right = right, left ^ (_mix(right, key) & self._low)
        return (left << self._half) | right

    def _decrypt(self, x: np.ndarray) -> np.ndarray:
        left, right = x >> self._half, x & self._low
        for key in reversed(self._keys):
            left, right = right ^ (_mix(left, key) & self._low), left
        return (left << self._half) | right

    def _walk(self, positions: np.ndarray, step) -> np.ndarray:  # type: ignore[no-untyped-def]
        x = np.asarray(positions, dtype=np.uint64)
        if x.size and int(x.max()) >= self.size:
            raise IndexError(f"position {int(x.max())} outside [0, {self.size})")
        x = step(x)
        outside = x >= np.uint64(self.size)
        while outside.any():  # cycle-walking: at most a few rounds, the domain is < 4 × size
            x[outside] = step(x[outside])
            outside = x >= np.uint64(self.size)
        return x.astype(np.int64)

    def __call__(self, positions: np.ndarray | int) -> np.ndarray:
        return self._walk(np.atleast_1d(positions), self._encrypt)

    def inverse(self, instances: np.ndarray | int) -> np.ndarray:
        return self._walk(np.atleast_1d(instances), self._decrypt)


@dataclass(frozen=True)
class GlobalOrder:
    """The endless training stream over ``size`` instances: epoch after epoch,
    each a :class:`FeistelPermutation` keyed by ``(seed, epoch)``."""

    size: int
    seed: int

    def instances(self, positions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(epoch, instance)`` of each global position."""
        positions = np.asarray(positions, dtype=np.int64)
        epochs, within = np.divmod(positions, self.size)
        instances = np.empty_like(positions)
        for epoch in np.unique(epochs):
            chosen = epochs == epoch
            instances[chosen] = FeistelPermutation(self.size, self.seed, int(epoch))(within[chosen])
        return epochs, instances


class BatchShapeError(ValueError):
    """A global batch that the micro-batch and the ranks do not divide; the
    message says which micro-batch sizes would."""


@dataclass(frozen=True)
class BatchLayout:
    """The batch shape, its one owner: a global batch of ``batch_size`` samples is
    ``accumulation`` micro-batches of ``micro_batch_size`` on each of
    ``world_size`` ranks. The DeepSpeed config, the data sampler and the Slurm
    job's pre-check all ask it.

    How the batch is cut and spread: micro-batch ``k`` of the step that starts at
    global position ``c`` holds positions ``c + k·micro .. c + (k+1)·micro``; rank
    ``r`` runs ``k = r, r + W, r + 2W, …``. The positions of a step never depend on
    ``W`` or ``micro``; which rank runs which micro-batch does."""

    batch_size: int
    micro_batch_size: int
    world_size: int
    rank: int = 0

    def __post_init__(self) -> None:
        for name, value in (("global batch", self.batch_size), ("micro-batch", self.micro_batch_size),
                            ("world size", self.world_size)):
            if not isinstance(value, int) or value < 1:
                raise BatchShapeError(f"{name} must be a positive integer, got {value!r}")
        if not 0 <= self.rank < self.world_size:
            raise ValueError(f"rank {self.rank} outside world size {self.world_size}")
        if self.batch_size % (self.micro_batch_size * self.world_size):
            fitting = self.micro_batch_sizes(self.batch_size, self.world_size)
            choice = (f"--micro-batch-size must divide the per-rank batch {self.batch_size // self.world_size}: "
                      f"one of {', '.join(map(str, fitting))}" if fitting else
                      f"no micro-batch fits: choose a --batch-size that {self.world_size} rank(s) divide")
            raise BatchShapeError(f"global batch {self.batch_size} is not micro-batch {self.micro_batch_size} × "
                                  f"{self.world_size} rank(s) × a whole number of accumulation steps; {choice}")

    @staticmethod
    def micro_batch_sizes(batch_size: int, world_size: int) -> list[int]:
        """Every micro-batch size that cuts a global batch of ``batch_size`` over
        ``world_size`` ranks (the divisors of the per-rank batch), smallest first."""
        if batch_size % world_size:
            return []
        per_rank = batch_size // world_size
        return [d for d in range(1, per_rank + 1) if per_rank % d == 0]

    @property
    def per_rank(self) -> int:
        """Samples of a global batch on each rank."""
        return self.batch_size // self.world_size

    @property
    def accumulation(self) -> int:
        """Micro-batches per optimizer step on each rank."""
        return self.batch_size // (self.micro_batch_size * self.world_size)

    def micro_batches(self, consumed: int) -> list[int]:
        """Global indices (``position // micro``) of this rank's micro-batches in
        the step that starts at ``consumed`` samples."""
        if consumed % self.micro_batch_size:
            raise ValueError(f"{consumed} samples consumed is not a multiple of micro-batch "
                             f"{self.micro_batch_size}")
        first = consumed // self.micro_batch_size
        return [first + self.rank + j * self.world_size for j in range(self.accumulation)]


def micro_batch_positions(layout: BatchLayout, consumed: int) -> Iterator[tuple[int, np.ndarray]]:
    """Endless ``(global micro-batch index, positions)`` for this rank from
    ``consumed`` samples on (a multiple of the global batch)."""
    if consumed % layout.batch_size:
        raise ValueError(f"{consumed} samples consumed is not a multiple of the global batch {layout.batch_size}")
    micro = layout.micro_batch_size
    while True:
        for index in layout.micro_batches(consumed):
            yield index, np.arange(index * micro, (index + 1) * micro, dtype=np.int64)
        consumed += layout.batch_size


DIGEST_MODULUS = 1 << 40  # partial digests of up to 2^23 ranks sum without overflowing int64


def sample_digest(sample_keys: np.ndarray) -> int:
    """An order-free fingerprint of a set of samples: the sum of their keys'
    hashes modulo 2^40, so the partial digests of the ranks add up (modulo the
    same) to the digest of the whole batch."""
    hashed = _mix(np.asarray(sample_keys, dtype=np.uint64), np.uint64(0x5EED)) % np.uint64(DIGEST_MODULUS)
    return int(sum(int(h) for h in hashed) % DIGEST_MODULUS)
