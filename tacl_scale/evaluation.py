"""Held-out evaluation during training (``train.py --eval-every``): the objective's
losses and the student's per-layer self-similarity (Eq. 3, over each held-out
sequence's real tokens, unmasked input) — the isotropy TaCL is about, watched live."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import torch

from .config import ObjectiveConfig
from .model import pretraining_losses, teacher_states
from .similarity import LayerStats, sentence_self_similarity


def layer_self_similarity(encoder: Any, batches: Iterable[dict[str, torch.Tensor]]) -> list[float]:
    """Eq. 3 per layer (embeddings first) of ``encoder`` (a BertModel) on the
    unmasked sequences of the batches."""
    layers: list[LayerStats] = []
    for batch in batches:
        out = encoder(input_ids=batch["original_ids"], attention_mask=batch["attention_mask"],
                      token_type_ids=batch["token_type_ids"], output_hidden_states=True)
        if not layers:
            layers = [LayerStats([]) for _ in out.hidden_states]
        for stats, hidden in zip(layers, out.hidden_states, strict=True):
            stats.add(*sentence_self_similarity(hidden, batch["attention_mask"].bool()))
    return [stats.summary()["eq3_mean"] for stats in layers]


@torch.no_grad()
def evaluate(
    student: Any,
    teacher: Any | None,
    batches: list[dict[str, torch.Tensor]],
    objective: ObjectiveConfig,
) -> dict[str, float]:
    """Mean held-out losses/accuracies and ``selfsim_layerK`` for every layer."""
    was_training = student.training
    student.eval()
    totals: dict[str, float] = {}
    for batch in batches:
        hidden = teacher_states(teacher, batch) if teacher is not None else None
        for key, value in pretraining_losses(student, batch, objective, hidden).items():
            totals[key] = totals.get(key, 0.0) + float(value) / len(batches)
    for k, value in enumerate(layer_self_similarity(student.bert, batches)):
        totals[f"selfsim_layer{k}"] = value
    student.train(was_training)
    return totals
