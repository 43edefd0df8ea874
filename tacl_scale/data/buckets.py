"""Token-count buckets for packed micro-batches, so a compiled encoder sees a few
shapes instead of one per micro-batch.

A packed micro-batch of ``B`` sequences holds ``T`` real tokens, a number that changes
from one micro-batch to the next. The compiled encoder instead runs on
``bucket(T)`` rows: ``T + tail_pieces`` rounded up to a multiple of ``step`` (each
padding sequence keeps at least one row). The rows past ``T`` are padding, laid out
as ``tail_pieces`` short sequences of their own (each at least
one token and at most ``max_len``), so they attend only to themselves and the real
sequences never see them; their outputs are dropped. The attention offsets then
always have ``B + 1 + tail_pieces`` entries and the longest sequence is
``max_len``, whatever the micro-batch: every shape the encoder sees is one of
``capacity / step + 1`` sizes, and none of them depends on the data beyond ``T``.

Pure integer arithmetic on host values: nothing here touches a tensor.
"""

from __future__ import annotations

from dataclasses import dataclass

# Rows are rounded to multiples of this (and of the step): the GEMMs' tile sizes.
ROW_ALIGNMENT = 128
# The step is about capacity / STEPS: on average half a step (< 1% of a full micro-batch) is padding.
STEPS = 64


@dataclass(frozen=True)
class TokenBuckets:
    """The buckets of packed micro-batches of at most ``capacity`` real tokens in
    sequences of at most ``max_len`` tokens (see the module docstring)."""

    capacity: int  # micro-batch × longest sequence: the most real tokens a micro-batch can hold
    max_len: int  # the longest sequence (the dataset's max_seq_len)

    def __post_init__(self) -> None:
        if self.capacity < 1 or self.max_len < 2:
            raise ValueError(f"token buckets need capacity >= 1 and max_len >= 2, got {self.capacity}, {self.max_len}")

    @classmethod
    def for_batches(cls, micro_batch: int, max_len: int) -> TokenBuckets:
        return cls(micro_batch * max_len, max_len)

    @property
    def step(self) -> int:
        """The bucket width in tokens."""
        wanted = -(-self.capacity // STEPS)
        return -(-wanted // ROW_ALIGNMENT) * ROW_ALIGNMENT

    @property
    def tail_pieces(self) -> int:
        """How many padding sequences hold the rows past ``T``: the fewest that keep
        each of them between 1 and ``max_len`` tokens whatever ``T`` is."""
        pieces = 1
        while -(-(self.step + pieces - 1) // pieces) > self.max_len:
            pieces += 1
        return pieces

    def bucket(self, tokens: int) -> int:
        """The rows a micro-batch of ``tokens`` real tokens runs on (a batch of the
        mirror objective's two views may hold up to twice the capacity: its buckets
        go on in the same steps)."""
        if tokens < 0:
            raise ValueError(f"a micro-batch cannot hold {tokens} tokens")
        return -(-(tokens + self.tail_pieces) // self.step) * self.step

    def tail_bounds(self, tokens: int) -> list[int]:
        """The end offsets of the padding sequences after ``tokens`` real tokens (the
        last is :meth:`bucket`): they cut the tail into :attr:`tail_pieces` near-equal
        sequences of 1 to ``max_len`` tokens."""
        rows, pieces = self.bucket(tokens), self.tail_pieces
        tail = rows - tokens
        return [tokens + (tail * j) // pieces for j in range(1, pieces + 1)]

    def sizes(self, most_tokens: int | None = None) -> list[int]:
        """Every bucket a micro-batch of at most ``most_tokens`` real tokens (default:
        the capacity; the mirror objective's two views: twice it) can fall into,
        smallest first."""
        most = self.capacity if most_tokens is None else most_tokens
        return list(range(self.bucket(0), self.bucket(most) + 1, self.step))
