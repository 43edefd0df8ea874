"""Checkpoints on top of DeepSpeed's: the data position and every rank's RNG
states beside the engine state, and a ``latest`` pointer that is only moved once
every rank has finished writing (so an interrupted save never becomes latest)."""

from __future__ import annotations

import os
import random
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

LATEST = "latest"


def tag_for(step: int) -> str:
    return f"step{step:08d}"


def latest_tag(root: Path) -> str | None:
    """The tag of the last complete checkpoint under ``root``, if any."""
    pointer = root / LATEST
    if not pointer.is_file():
        return None
    tag = pointer.read_text(encoding="utf-8").strip()
    return tag if (root / tag).is_dir() else None


def rng_states() -> dict[str, Any]:
    return {
        "python": random.getstate(),
        "numpy": np.random.get_state(),
        "torch": torch.get_rng_state(),
        "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None,
    }


def restore_rng_states(states: dict[str, Any]) -> None:
    random.setstate(states["python"])
    np.random.set_state(states["numpy"])
    torch.set_rng_state(states["torch"])
    if states.get("cuda") is not None and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(states["cuda"])


def save(engine: Any, root: Path, step: int, client_state: dict[str, Any], keep_last: int,
         barrier: Callable[[], None]) -> str:
    """Save a checkpoint of ``engine`` at ``step`` (call on every rank; ``barrier``
    waits for all of them)."""
    tag = tag_for(step)
    engine.save_checkpoint(str(root), tag=tag, client_state=client_state, save_latest=False)
    torch.save(rng_states(), root / tag / f"rng_rank{engine.global_rank:05d}.pt")
    barrier()
    if engine.global_rank == 0:
        tmp = root / f".{LATEST}.tmp"
        tmp.write_text(tag, encoding="utf-8")
        os.replace(tmp, root / LATEST)
        tags = sorted(p.name for p in root.iterdir() if p.is_dir() and p.name.startswith("step"))
        for old in tags[:-keep_last] if keep_last > 0 else []:
            shutil.rmtree(root / old, ignore_errors=True)
    barrier()
    return tag


def load(engine: Any, root: Path, tag: str) -> dict[str, Any]:
    """Load ``tag`` into ``engine``; restore this rank's RNG; return the client
    state (data position, step)."""
    _, client_state = engine.load_checkpoint(str(root), tag=tag)
    if client_state is None:
        raise RuntimeError(f"{root / tag}: DeepSpeed could not load the checkpoint")
    rng_file = root / tag / f"rng_rank{engine.global_rank:05d}.pt"
    if rng_file.is_file():
        restore_rng_states(torch.load(rng_file, weights_only=False))
    return client_state
