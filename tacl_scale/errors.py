"""The errors training reports as one ``error:`` line (``train.main``), in a module
of their own: the command catches them before it imports the training stack, so
that ``--help`` and a refused flag need not wait seconds for torch's and
transformers' models to load."""

from __future__ import annotations


class TrainError(RuntimeError):
    """Training refused to start or cannot go on; the message says why. Every rank
    raises it alike, and rank 0 says it."""


class RankError(TrainError):
    """What failed on this rank alone (its batch, its checkpoint files): the rank
    says it; the launcher then stops the others."""
