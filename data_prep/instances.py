"""NSP sentence-pair instances, with the semantics of google-research/bert's
``create_instances_from_document``.

A document is a sequence of sentences, each an array of token ids (no specials).
The functions here only choose *which* token ranges form A and B; materialising the
``[CLS] A [SEP] B [SEP]`` sequence is :func:`assemble`. All randomness comes from
the ``random.Random`` passed in, which the caller seeds from (seed, document id,
dupe index), so the result never depends on how the work was distributed.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

# A document, as the pair builder sees it: the token count of each sentence.
SentenceLengths = Sequence[int]


class TokenStore(Protocol):
    """Where the tokens (or any per-token values) of the documents live."""

    def values(self, segment: Segment) -> np.ndarray:
        """The values of ``segment``: tokens ``[start, stop)`` of its sentences joined."""
        ...


@dataclass(frozen=True)
class InstanceConfig:
    """Shape of the instances (``short_seq_prob`` and ``random_next_prob`` as
    google-research/bert; ``max_seq_len`` defaults to the paper's 256, not its 128)."""

    max_seq_len: int = 256
    short_seq_prob: float = 0.1
    random_next_prob: float = 0.5
    # Every sentence alone as ``[CLS] sentence [SEP]`` (truncated at the end), no
    # pairs and no static masks: the input of the sentence-level mirror objective.
    single_segment: bool = False

    def __post_init__(self) -> None:
        if self.max_seq_len < 5:
            raise ValueError(f"--max-seq-len {self.max_seq_len} leaves no room for A and B")
        for name, value in (("--short-seq-prob", self.short_seq_prob), ("random_next_prob", self.random_next_prob)):
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"{name} must be in [0, 1], got {value}")

    @property
    def kind(self) -> str:
        """The manifest's ``instance_kind``: ``pairs`` or ``single-segment``."""
        return "single-segment" if self.single_segment else "pairs"


# Segment and PairSpec are values (never changed after creation); not frozen, as a
# frozen dataclass takes four times as long to create, and a shard creates millions.
@dataclass(slots=True)
class Segment:
    """Tokens ``[start, stop)`` of the concatenation of sentences ``first..last``
    (inclusive) of document ``document``."""

    document: int
    first: int
    last: int
    start: int
    stop: int

    def __len__(self) -> int:
        return self.stop - self.start


@dataclass(slots=True)
class PairSpec:
    """One instance before materialisation."""

    a: Segment
    b: Segment | None  # None: a single-segment instance
    is_random_next: bool


def _segment(document: int, lengths: SentenceLengths, first: int, last: int) -> Segment:
    return Segment(document, first, last, 0, sum(lengths[first : last + 1]))


def _truncate_pair(a: Segment, b: Segment, max_num_tokens: int, rng: random.Random) -> tuple[Segment, Segment]:
    """google-research/bert ``truncate_seq_pair``: trim the longer side, one token
    at a time, from the front or the back at random (to avoid a bias to either)."""
    a_length, b_length = a.stop - a.start, b.stop - b.start
    excess = a_length + b_length - max_num_tokens
    if excess <= 0:
        return a, b
    draw = rng.random
    a_front = a_back = b_front = b_back = 0
    for _ in range(excess):
        if a_length > b_length:
            a_length -= 1
            if draw() < 0.5:
                a_front += 1
            else:
                a_back += 1
        else:
            b_length -= 1
            if draw() < 0.5:
                b_front += 1
            else:
                b_back += 1
    return (
        Segment(a.document, a.first, a.last, a.start + a_front, a.stop - a_back),
        Segment(b.document, b.first, b.last, b.start + b_front, b.stop - b_back),
    )


def randint(rng: random.Random, low: int, high: int) -> int:
    """``rng.randint(low, high)``, draw for draw (CPython's algorithm: ``getrandbits``
    of the range's bit length until below its size), without the three Python calls
    it goes through; a shard build draws hundreds of thousands (tested against
    ``random.Random.randint``)."""
    size = high - low + 1
    if size <= 0:
        raise ValueError(f"empty range for randint({low}, {high})")
    bits = size.bit_length()
    value = rng.getrandbits(bits)
    while value >= size:
        value = rng.getrandbits(bits)
    return low + value


def create_pairs_from_document(
    documents: Sequence[SentenceLengths],
    document_index: int,
    config: InstanceConfig,
    rng: random.Random,
) -> list[PairSpec]:
    """The NSP pairs of ``documents[document_index]`` (``documents[d][k]`` is the
    token count of sentence k of document d).

    Sentences are accumulated into a chunk until the target length (the maximum,
    or with probability ``short_seq_prob`` a random shorter one, so the model also
    sees short inputs) is reached; a random split point makes A; B is the rest of
    the chunk, or — with probability ``random_next_prob``, and always for a
    one-sentence chunk — text from a random other document, in which case the
    unused sentences of the chunk are put back. Pairs longer than the maximum are
    truncated at random ends.
    """
    document = documents[document_index]
    max_num_tokens = config.max_seq_len - 3
    target_seq_length = max_num_tokens
    if rng.random() < config.short_seq_prob:
        target_seq_length = randint(rng, 2, max_num_tokens)

    pairs: list[PairSpec] = []
    num_sentences = len(document)
    last_document = len(documents) - 1
    chunk_start = 0  # first sentence of the current chunk
    current_length = 0
    i = 0
    while i < num_sentences:
        current_length += document[i]
        if i == num_sentences - 1 or current_length >= target_seq_length:
            chunk_len = i - chunk_start + 1
            a_end = randint(rng, 1, chunk_len - 1) if chunk_len >= 2 else 1
            a = _segment(document_index, document, chunk_start, chunk_start + a_end - 1)
            if chunk_len == 1 or rng.random() < config.random_next_prob:
                is_random_next = True
                target_b_length = target_seq_length - (a.stop - a.start)
                random_index, random_document = document_index, document
                for _ in range(10):
                    random_index = randint(rng, 0, last_document)
                    random_document = documents[random_index]  # looked up once: it may be read from disk
                    if random_index != document_index and len(random_document):
                        break
                if not len(random_document):  # only empty others: fall back to self
                    random_index, random_document = document_index, document
                random_start = randint(rng, 0, len(random_document) - 1)
                b_length = 0
                last = random_start
                for last in range(random_start, len(random_document)):
                    b_length += random_document[last]
                    if b_length >= target_b_length:
                        break
                b = Segment(random_index, random_start, last, 0, b_length)
                # The chunk's unused sentences go back for the next instance.
                i -= chunk_len - a_end
            else:
                is_random_next = False
                b = _segment(document_index, document, chunk_start + a_end, i)
            a, b = _truncate_pair(a, b, max_num_tokens, rng)
            if a.stop > a.start and b.stop > b.start:  # both non-empty
                pairs.append(PairSpec(a, b, is_random_next))
            chunk_start = i + 1
            current_length = 0
        i += 1
    return pairs


def single_segments(sentence_lengths: SentenceLengths, document_index: int, config: InstanceConfig) -> list[PairSpec]:
    """Every sentence of a document as a single-segment instance (no B), cut to
    ``max_seq_len - 2`` tokens (room for ``[CLS]`` and ``[SEP]``) at its end."""
    room = config.max_seq_len - 2
    return [PairSpec(Segment(document_index, k, k, 0, min(length, room)), None, False)
            for k, length in enumerate(sentence_lengths)]


def assemble(a: np.ndarray, b: np.ndarray | None, cls_id: int, sep_id: int) -> np.ndarray:
    """``[CLS] A [SEP] B [SEP]`` as one int64 array; ``[CLS] A [SEP]`` without B."""
    if b is None:
        out = np.empty(len(a) + 2, dtype=np.int64)
        out[0], out[1:-1], out[-1] = cls_id, a, sep_id
        return out
    out = np.empty(len(a) + len(b) + 3, dtype=np.int64)
    out[0] = cls_id
    out[1 : 1 + len(a)] = a
    out[1 + len(a)] = sep_id
    out[2 + len(a) : -1] = b
    out[-1] = sep_id
    return out


def assemble_all(pairs: Sequence[PairSpec], store: TokenStore, cls_value: int,
                 sep_value: int, dtype: np.dtype | type = np.int64) -> tuple[np.ndarray, list[int]]:
    """The sequences of ``pairs`` as :func:`assemble` makes them, joined into one
    array, and the length of each: the same values as assembling pair by pair, in
    one numpy call (a shard build assembles hundreds of thousands of short
    sequences, where the per-call cost dominates)."""
    cls = np.full(1, cls_value, dtype=dtype)
    sep = np.full(1, sep_value, dtype=dtype)
    pieces: list[np.ndarray] = []
    lengths: list[int] = []
    for pair in pairs:
        pieces += (cls, store.values(pair.a), sep)
        if pair.b is None:
            lengths.append(len(pair.a) + 2)
        else:
            pieces += (store.values(pair.b), sep)
            lengths.append(len(pair.a) + len(pair.b) + 3)
    if not pieces:
        return np.zeros(0, dtype=dtype), lengths
    return np.concatenate(pieces).astype(dtype, copy=False), lengths
