"""BERT masked-LM masking (google-research/bert ``create_masked_lm_predictions``).

Pure numpy, and part of the dataset contract: ``data_prep`` masks with it when it
builds a dataset (static masking), training re-masks with it for
``--dynamic-masking``, with the rules the manifest records, so both follow the same
rules.
"""

from __future__ import annotations

import hashlib
import math
import random
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class MaskingConfig:
    """Masking rates. ``max_predictions_per_seq`` None means
    ``ceil(max_seq_len * masked_lm_prob)`` (20 at 128, as google-research/bert)."""

    masked_lm_prob: float = 0.15
    max_predictions_per_seq: int | None = None
    mask_token_prob: float = 0.8
    random_token_prob: float = 0.1
    whole_word_masking: bool = False

    def __post_init__(self) -> None:
        if not 0.0 < self.masked_lm_prob < 1.0:
            raise ValueError(f"--masked-lm-prob {self.masked_lm_prob} must be in (0, 1)")
        if not (self.mask_token_prob >= 0 and self.random_token_prob >= 0
                and self.mask_token_prob + self.random_token_prob <= 1):
            raise ValueError(f"mask_token_prob {self.mask_token_prob} and random_token_prob {self.random_token_prob}: "
                             "each must be >= 0 and their sum at most 1")
        if self.max_predictions_per_seq is not None and self.max_predictions_per_seq < 1:
            raise ValueError(f"--max-predictions-per-seq {self.max_predictions_per_seq} must be >= 1")

    def resolved_max_predictions(self, max_seq_len: int) -> int:
        if self.max_predictions_per_seq is not None:
            return self.max_predictions_per_seq
        return math.ceil(max_seq_len * self.masked_lm_prob)


@dataclass(frozen=True)
class MaskedTokens:
    """The masked positions of one instance and the token placed at each."""

    positions: np.ndarray  # sorted, int64
    placed: np.ndarray  # the token put at each position, int64


@dataclass(frozen=True)
class MaskedInstances:
    """The masks of instances joined end to end: ``counts[k]`` entries of
    ``positions``/``placed`` (in order) belong to instance k."""

    positions: np.ndarray  # int64, within each instance, sorted per instance
    placed: np.ndarray  # int64, the token put at each position
    counts: list[int]


def seeded_generators(seed: int, document_id: str, dupe: int) -> tuple[random.Random, np.random.Generator]:
    """The generators for one (seed, document, dupe) triple: a ``random.Random``
    for the pair choices and a numpy ``Generator`` for the masks. Stable across
    Python versions, processes and machines (no ``hash()`` randomisation)."""
    digest = hashlib.blake2b(f"{seed}\x00{document_id}\x00{dupe}".encode(), digest_size=8)
    value = int.from_bytes(digest.digest(), "little")
    return random.Random(value), np.random.default_rng(value)


def mask_tokens(
    tokens: np.ndarray,
    maskable: np.ndarray,
    word_starts: np.ndarray | None,
    config: MaskingConfig,
    max_predictions: int,
    mask_id: int,
    replacement_ids: np.ndarray,
    rng: np.random.Generator,
) -> MaskedTokens:
    """Choose positions to predict and the token placed at each.

    ``maskable`` is False at special tokens ([CLS], [SEP], [UNK], ...), which are
    never chosen. The number chosen is ``round(masked_lm_prob · #maskable)`` (at
    least 1, at most ``max_predictions``) — google-research/bert counts the specials
    too; we count the tokens that can be masked, so the share is exactly the
    configured one. With whole-word masking, a word (a word-start token and the
    continuation tokens after it, ``word_starts`` False) is masked entirely or not at
    all: words are visited in random order and a word that would overshoot the
    budget is passed over, as google-research/bert does. Each chosen token becomes
    ``[MASK]`` (80%), a random non-special token (10%; drawn from
    ``replacement_ids``) or stays unchanged (10%).
    """
    masked = mask_instances(tokens, maskable, word_starts, [len(tokens)], [rng], config,
                            max_predictions, mask_id, replacement_ids)
    return MaskedTokens(masked.positions, masked.placed)


def mask_instances(
    tokens: np.ndarray,
    maskable: np.ndarray,
    word_starts: np.ndarray | None,
    lengths: Sequence[int],
    rngs: Sequence[np.random.Generator],
    config: MaskingConfig,
    max_predictions: int,
    mask_id: int,
    replacement_ids: np.ndarray,
) -> MaskedInstances:
    """:func:`mask_tokens` for many instances joined end to end (instance k is the
    next ``lengths[k]`` values of ``tokens``, ``maskable`` and ``word_starts``),
    instance k drawing from ``rngs[k]``: the same masks as one call per instance.

    Only the random draws run per instance, in the contract's order (the choice,
    then one uniform per chosen token, then the replacements); everything else is
    a handful of numpy calls for all instances. Datasets of format 4 and older were
    masked this way, one generator per instance; training's ``--dynamic-masking``
    masks one instance at a time through :func:`mask_tokens`, which calls this.
    Shard builds of format 5 mask a document's instances at once with
    :func:`mask_pass`.
    """
    bounds, positions, cuts = _maskable_by_instance(maskable, lengths)
    budgets = _budgets(np.diff(cuts), config, max_predictions)
    lo = config.mask_token_prob
    hi = config.mask_token_prob + config.random_token_prob
    whole_words = config.whole_word_masking and word_starts is not None
    chosen_parts: list[np.ndarray] = []
    draw_parts: list[np.ndarray] = []
    replacement_parts: list[np.ndarray] = []
    cut_list = cuts.tolist()
    # The random calls run in a fixed order on every path: the draws, and so the
    # masks, are part of the dataset contract (same seed → same bytes).
    for k, (budget, rng) in enumerate(zip(budgets.tolist(), rngs, strict=True)):
        first, end = cut_list[k], cut_list[k + 1]
        if first == end:
            continue  # nothing maskable: no draws at all
        if whole_words:
            chosen = _whole_words(positions[first:end], word_starts, int(budget), rng)
        else:
            chosen = rng.permutation(positions[first:end])[: int(budget)]
        draws = rng.random(len(chosen))
        randomized = np.count_nonzero((draws >= lo) & (draws < hi))
        chosen_parts.append(chosen)
        draw_parts.append(draws)
        replacement_parts.append(rng.integers(0, len(replacement_ids), randomized))
    if not chosen_parts:
        empty = np.zeros(0, dtype=np.int64)
        return MaskedInstances(empty, empty.copy(), [0] * len(lengths))
    # Instances occupy increasing, disjoint ranges: one sort orders every instance's
    # positions and keeps the instances in order, matching the draws.
    chosen = np.sort(np.concatenate(chosen_parts)).astype(np.int64, copy=False)
    return _place(tokens, bounds, chosen, np.concatenate(draw_parts), np.concatenate(replacement_parts), config,
                  mask_id, replacement_ids)


def mask_pass(
    tokens: np.ndarray,
    maskable: np.ndarray,
    word_starts: np.ndarray | None,
    lengths: Sequence[int],
    rng: np.random.Generator,
    config: MaskingConfig,
    max_predictions: int,
    mask_id: int,
    replacement_ids: np.ndarray,
) -> MaskedInstances:
    """The static masks of a dataset of format 5 and later: the instances of one pass
    over a document (joined end to end as for :func:`mask_instances`) masked with the
    rules of :func:`mask_tokens`, all drawing from one generator, in this order:

    1. a key per maskable position of the pass (``rng.random``); with whole-word
       masking, a key per word instead;
    2. instance k takes the ``budget`` maskable positions of its own with the
       smallest keys (compared as ``k + key / 2`` in float64; equal values, which
       that rounding can make, in position order); with whole-word masking it visits
       its words in that order and takes each that still fits the budget;
    3. a uniform per chosen position, in position order (``rng.random``): ``[MASK]``
       below ``mask_token_prob``, a random token below ``mask_token_prob +
       random_token_prob``, else the token kept;
    4. the random tokens, as indices into ``replacement_ids`` (``rng.integers``), in
       position order.

    Each instance's choice is a uniform random subset of its maskable positions, as
    google-research/bert's shuffle-and-take is; the draws are four numpy calls per
    pass instead of three per instance (:func:`mask_instances`, format 4 and
    earlier), which made masking most of a shard build's time.
    """
    bounds, positions, cuts = _maskable_by_instance(maskable, lengths)
    per_instance = np.diff(cuts)
    takes = np.minimum(_budgets(per_instance, config, max_predictions), per_instance)
    if config.whole_word_masking and word_starts is not None:
        chosen = _whole_words_of_pass(positions, cuts, word_starts, takes, rng)
    else:
        chosen = _smallest_keys(positions, per_instance, takes, rng.random(len(positions)))
    draws = rng.random(len(chosen))
    randomized = np.count_nonzero((draws >= config.mask_token_prob)
                                  & (draws < config.mask_token_prob + config.random_token_prob))
    replacements = rng.integers(0, len(replacement_ids), randomized)
    return _place(tokens, bounds, chosen, draws, replacements, config, mask_id, replacement_ids)


def _maskable_by_instance(maskable: np.ndarray, lengths: Sequence[int]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(instance bounds in the joined arrays, the maskable positions, and where each
    instance's maskable positions start among them: ``cuts[k]:cuts[k + 1]``)."""
    bounds = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=bounds[1:])
    positions = maskable.nonzero()[0]
    return bounds, positions, np.searchsorted(positions, bounds)


def _budgets(maskable_counts: np.ndarray, config: MaskingConfig, max_predictions: int) -> np.ndarray:
    """Positions to predict per instance: ``round(masked_lm_prob · #maskable)``, at
    least 1, at most ``max_predictions``."""
    return np.minimum(max_predictions, np.maximum(1, np.rint(maskable_counts * config.masked_lm_prob))).astype(np.int64)


def _smallest_keys(positions: np.ndarray, per_instance: np.ndarray, takes: np.ndarray,
                   keys: np.ndarray) -> np.ndarray:
    """Of each instance's maskable positions, the ``takes[k]`` with the smallest keys
    (see :func:`mask_pass`), in position order."""
    instance = np.repeat(np.arange(len(per_instance), dtype=np.float64), per_instance)
    ranked = instance + keys / 2  # instance k's values lie in [k, k + 1/2]: sorted, they stay grouped
    starts = np.cumsum(per_instance) - per_instance
    ordered = np.sort(ranked)
    taking = takes > 0
    thresholds = np.full(len(takes), -1.0)
    thresholds[taking] = ordered[starts[taking] + takes[taking] - 1]  # each instance's takes[k]-th smallest
    take = ranked <= np.repeat(thresholds, per_instance)
    if np.count_nonzero(take) == int(takes.sum()):
        return positions[take]
    # A value equal to an instance's threshold: decide by position (a stable sort).
    order = np.argsort(ranked, kind="stable")
    rank = np.arange(len(positions)) - np.repeat(starts, per_instance)
    return np.sort(positions[order[rank < np.repeat(takes, per_instance)]])


def _whole_words_of_pass(positions: np.ndarray, cuts: np.ndarray, word_starts: np.ndarray, takes: np.ndarray,
                         rng: np.random.Generator) -> np.ndarray:
    """Whole-word masking of :func:`mask_pass`: each instance visits its words by key
    and takes each that still fits its budget; the chosen positions in order."""
    new_word = _word_firsts(positions, word_starts)
    new_word[cuts[:-1][cuts[:-1] < len(positions)]] = True  # no word spans two instances
    firsts = new_word.nonzero()[0]
    sizes = np.diff(np.append(firsts, len(positions)))
    instance_of_word = np.searchsorted(cuts, firsts, side="right") - 1
    keys = rng.random(len(firsts))
    order = np.argsort(instance_of_word + keys / 2, kind="stable").tolist()
    words_per_instance = np.bincount(instance_of_word, minlength=len(takes)).tolist()
    first_list, size_list = firsts.tolist(), sizes.tolist()
    pieces: list[np.ndarray] = []
    at = 0
    for budget, count in zip(takes.tolist(), words_per_instance, strict=True):
        taken = 0
        for word in order[at : at + count]:
            if taken >= budget:
                break
            if taken + size_list[word] <= budget:
                pieces.append(positions[first_list[word] : first_list[word] + size_list[word]])
                taken += size_list[word]
        at += count
    return np.sort(np.concatenate(pieces)) if pieces else positions[:0]


def _word_firsts(positions: np.ndarray, word_starts: np.ndarray) -> np.ndarray:
    """Which of the maskable ``positions`` start a word: a word-start token, or one
    after a gap (a special token or an unmaskable one)."""
    first = np.ones(len(positions), dtype=bool)
    first[1:] = word_starts[positions[1:]] | (np.diff(positions) != 1)
    return first


def _place(tokens: np.ndarray, bounds: np.ndarray, chosen: np.ndarray, draws: np.ndarray, replacements: np.ndarray,
           config: MaskingConfig, mask_id: int, replacement_ids: np.ndarray) -> MaskedInstances:
    """The masks of the ``chosen`` positions (of the joined instances, ascending),
    given one draw per position and the random tokens' indices, per instance."""
    lo = config.mask_token_prob
    hi = config.mask_token_prob + config.random_token_prob
    chosen = chosen.astype(np.int64, copy=False)
    placed = np.asarray(tokens, dtype=np.int64)[chosen]
    placed[draws < lo] = mask_id
    placed[(draws >= lo) & (draws < hi)] = replacement_ids[replacements]
    counts = np.diff(np.searchsorted(chosen, bounds))
    return MaskedInstances(chosen - np.repeat(bounds[:-1], counts), placed, counts.tolist())


def _whole_words(positions: np.ndarray, word_starts: np.ndarray, budget: int,
                 rng: np.random.Generator) -> np.ndarray:
    """Whole words of ``positions`` (maskable positions of one instance) visited in a
    random order, each taken if it still fits ``budget``."""
    starts = _word_firsts(positions, word_starts).nonzero()[0].tolist()
    ends = starts[1:] + [len(positions)]
    pieces = []
    count = 0
    for word in rng.permutation(len(starts)).tolist():
        if count >= budget:
            break
        size = ends[word] - starts[word]
        if count + size > budget:
            continue
        pieces.append(positions[starts[word] : ends[word]])
        count += size
    return np.concatenate(pieces) if pieces else positions[:0]
