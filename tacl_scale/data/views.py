"""The two input views of the sentence-level contrastive objective (``mirror``; see
:mod:`tacl_scale.mirror`): view 1 is the instance's unmasked sequence, and view 2
is the same sequence with one random span of ``span_tokens`` consecutive
non-special tokens replaced by ``[MASK]``. This is Mirror-BERT's input-space
augmentation; dropout is the other, applied in the model. Pure numpy, in the
DataLoader's workers, seeded by (seed, epoch, instance), like dynamic masking, so the
views do not depend on the rank count or the batch they land in."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .manifest import Manifest

# A sequence is span-masked only if it has this many times the span in maskable
# tokens (Mirror-BERT: 5 characters of a string of at least 30).
MIN_TOKENS_PER_SPAN_TOKEN = 6


def span_masked(
    tokens: np.ndarray, maskable: np.ndarray, span: int, mask_id: int, rng: np.random.Generator
) -> np.ndarray:
    """A copy of ``tokens`` with ``span`` consecutive maskable tokens (a window
    that crosses no special token) set to ``mask_id``. The copy is unchanged when
    ``span`` is 0, the sequence has fewer than ``6 × span`` maskable tokens, or no
    window fits."""
    out = np.array(tokens, dtype=np.int64, copy=True)
    if span <= 0 or int(np.count_nonzero(maskable)) < MIN_TOKENS_PER_SPAN_TOKEN * span:
        return out
    fits = np.convolve(maskable.astype(np.int64), np.ones(span, dtype=np.int64), mode="valid") == span
    starts = np.flatnonzero(fits)
    if len(starts) == 0:
        return out
    start = int(starts[rng.integers(0, len(starts))])
    out[start : start + span] = mask_id
    return out


@dataclass(frozen=True)
class MirrorViews:
    """Adds ``mirror_ids`` (2, n) to an item: its unmasked ids, then the same with
    a random span masked."""

    seed: int
    span_tokens: int
    mask_id: int
    special_ids: tuple[int, ...]

    @classmethod
    def for_manifest(cls, manifest: Manifest, seed: int, span_tokens: int) -> MirrorViews:
        """The views of a dataset's instances: its ``[MASK]`` id, and every special
        token of its tokenizer kept out of the span."""
        specials = manifest.tokenizer.special_ids
        return cls(seed, span_tokens, specials.mask, specials.all())

    def apply(self, item: dict[str, Any], epoch: int, instance: int) -> dict[str, Any]:
        """``item`` with its two views, the span drawn from (seed, epoch, instance)."""
        original = np.asarray(item["original_ids"], dtype=np.int64)
        # Its own stream (the trailing 2), apart from dynamic masking's (seed, epoch, instance).
        rng = np.random.default_rng([self.seed, epoch, instance, 2])
        maskable = ~np.isin(original, self.special_ids)
        second = span_masked(original, maskable, self.span_tokens, self.mask_id, rng)
        return {**item, "mirror_ids": np.stack([original, second])}
