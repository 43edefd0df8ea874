"""Self-similarity of token representations (TaCL paper, Eq. 3): the measure
training's held-out evaluation watches and the analysis command reports.

    s(x) = 1/(n(n−1)) Σ_i Σ_{j≠i} cos(h_i, h_j)   over the real tokens of a sentence
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F


def sentence_self_similarity(hidden: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per sentence: (sum of cos(h_i, h_j) over ordered pairs i≠j of real tokens,
    number of such pairs). ``hidden`` (B, L, D), ``mask`` (B, L) bool."""
    unit = F.normalize(hidden.float(), dim=-1) * mask[..., None]
    # Σ_i Σ_j cos = ‖Σ_i ĥ_i‖²; subtract the diagonal (n terms of 1, for non-zero rows).
    total = unit.sum(dim=1).pow(2).sum(dim=-1)
    diagonal = unit.pow(2).sum(dim=(1, 2))
    n = mask.sum(dim=1).double()
    return (total - diagonal).double(), n * (n - 1)


@dataclass
class LayerStats:
    """Accumulates one layer's statistics over batches."""

    per_sentence: list[float]
    pair_sum: float = 0.0
    pair_count: float = 0.0

    def add(self, sums: torch.Tensor, pairs: torch.Tensor) -> None:
        """Add a batch of :func:`sentence_self_similarity`; sentences without a pair
        (one token) are not counted."""
        keep = pairs > 0
        self.per_sentence.extend((sums[keep] / pairs[keep]).tolist())
        self.pair_sum += float(sums[keep].sum())
        self.pair_count += float(pairs[keep].sum())

    def summary(self) -> dict[str, float]:
        values = torch.tensor(self.per_sentence, dtype=torch.float64)
        return {
            "eq3_mean": float(values.mean()) if len(values) else float("nan"),
            "eq3_std": float(values.std()) if len(values) > 1 else 0.0,
            "n_sentences": len(values),
            "pair_weighted_mean": self.pair_sum / self.pair_count if self.pair_count else float("nan"),
            "n_pairs": int(self.pair_count),
        }
