"""Checkpoints on top of DeepSpeed's: the data position and every rank's RNG
states beside the engine state, a record of every file with its size and sha256
(``files.json``), and a ``latest`` pointer that is only moved once every rank has
finished writing and the record exists (so an interrupted save never becomes
latest). On resume the newest checkpoint whose files match their record is used; a
truncated or corrupted one is named and skipped."""

from __future__ import annotations

import json
import logging
import os
import random
import re
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

from .data.manifest import atomic_write, file_sha256

LATEST = "latest"
FILES = "files.json"
STATE = "trainer_state.json"  # step, data position, batch and world size, readable without torch
UNIVERSAL = ".universal"  # suffix of a checkpoint's DeepSpeed universal conversion
_TAG = re.compile(r"^step\d{8}$")

log = logging.getLogger(__name__)


def tag_for(step: int) -> str:
    return f"step{step:08d}"


def tags(root: Path) -> list[str]:
    """The checkpoint tags under ``root``, oldest first (universal copies excluded)."""
    return sorted(p.name for p in root.iterdir() if p.is_dir() and _TAG.match(p.name)) if root.is_dir() else []


def latest_tag(root: Path) -> str | None:
    """The tag of the last complete checkpoint under ``root``, if any."""
    pointer = root / LATEST
    if not pointer.is_file():
        return None
    tag = pointer.read_text(encoding="utf-8").strip()
    return tag if (root / tag).is_dir() else None


def record_files(directory: Path) -> dict[str, dict[str, Any]]:
    """Write ``directory/files.json``: every file below it (the record itself
    excluded) with its size and sha256; returns the record."""
    files = {
        str(path.relative_to(directory)): {"bytes": path.stat().st_size, "sha256": file_sha256(path)}
        for path in sorted(directory.rglob("*"))
        if path.is_file() and path.name != FILES and not path.name.startswith(f".{FILES}.")
    }
    atomic_write(directory / FILES, json.dumps(files, indent=1))
    return files


def verify(directory: Path) -> str | None:
    """``None`` when every file of a checkpoint matches its record, else what is
    wrong, naming the file."""
    record = directory / FILES
    if not record.is_file():
        return f"{record}: missing (the save did not finish)"
    try:
        files = json.loads(record.read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        return f"{record}: unreadable: {err}"
    for name, expected in files.items():
        path = directory / name
        if not path.is_file():
            return f"{path}: missing"
        size = path.stat().st_size
        if size != expected["bytes"]:
            return f"{path}: {size} bytes, {expected['bytes']} when saved (truncated or overwritten)"
        if file_sha256(path) != expected["sha256"]:
            return f"{path}: contents differ from when it was saved (sha256 mismatch)"
    return None


def verify_unrecorded(directory: Path) -> str | None:
    """What can be checked of a checkpoint saved without a record (by a version
    that kept none): every torch file is a whole zip archive whose members match
    their CRC-32 (a truncated or bit-flipped file fails). ``None`` when it passes,
    else what is wrong, naming the file."""
    for path in sorted(directory.rglob("*.pt")):
        try:
            with zipfile.ZipFile(path) as archive:
                bad = archive.testzip()
        except (OSError, zipfile.BadZipFile) as err:
            return f"{path}: not a whole torch file (truncated?): {err}"
        if bad is not None:
            return f"{path}: its member {bad} fails its CRC-32 check (corrupt)"
    return None


def newest_verified_tag(root: Path) -> tuple[str | None, list[str]]:
    """The newest checkpoint by step whose files verify, whatever ``latest`` says
    (a lost or stale pointer must not restart a run from an older step), and the
    problems of the newer ones (each names its file). A checkpoint with no record
    at all (saved by a version that kept none) is taken unchecked only when
    ``latest`` names it, and checked as far as it can be (:func:`verify_unrecorded`);
    otherwise it is a save that did not finish."""
    latest = latest_tag(root)
    problems = []
    for tag in reversed(tags(root)):
        directory = root / tag
        if not (directory / FILES).exists():
            if tag == latest and not any(directory.glob(f".{FILES}.*")):
                problem = verify_unrecorded(directory)
                if problem is not None:
                    problems.append(problem)
                    continue
                log.warning("%s has no %s (saved before checkpoints were verified): loading it unchecked",
                            directory, FILES)
                return tag, problems
            problems.append(f"{directory / FILES}: missing (the save did not finish)")
            continue
        problem = verify(directory)
        if problem is None:
            return tag, problems
        problems.append(problem)
    return None, problems


def rng_states() -> dict[str, Any]:
    """This rank's RNG states. On CUDA only the current device's: a job resumed with
    fewer GPUs per node (1×8 → 2×4) must not need devices it cannot see."""
    return {
        "python": random.getstate(),
        "numpy": np.random.get_state(),
        "torch": torch.get_rng_state(),
        "cuda": torch.cuda.get_rng_state() if torch.cuda.is_available() else None,
    }


def restore_rng_states(states: dict[str, Any]) -> None:
    """Restore what :func:`rng_states` saved. Checkpoints from before it saved one
    device hold every device's state as a list: the current device's entry is used
    when the list has one, else the CUDA state is left as it is (the trainer seeds
    each micro-batch anyway, so only this is lost: nothing a step depends on)."""
    random.setstate(states["python"])
    np.random.set_state(states["numpy"])
    torch.set_rng_state(states["torch"])
    cuda = states.get("cuda")
    if cuda is None or not torch.cuda.is_available():
        return
    if isinstance(cuda, (list, tuple)):
        device = torch.cuda.current_device()
        if device >= len(cuda):
            log.warning("the checkpoint's CUDA RNG states cover %d device(s), this rank is on cuda:%d: its CUDA "
                        "RNG is not restored", len(cuda), device)
            return
        cuda = cuda[device]
    torch.cuda.set_rng_state(cuda)


def place_optimizer_state(optimizer: torch.optim.Optimizer) -> int:
    """Move every state tensor of ``optimizer`` to its parameter's device; returns
    how many were moved. ``load_state_dict`` does this itself, but DeepSpeed's
    universal-checkpoint load assigns the saved ``step`` straight into the state as
    a CPU tensor, and the fused AdamW kernel refuses tensors on two devices."""
    moved = 0
    for group in optimizer.param_groups:
        for param in group["params"]:
            state = optimizer.state.get(param, {})
            for key, value in state.items():
                if torch.is_tensor(value) and value.device != param.device:
                    state[key] = value.to(param.device)
                    moved += 1
    return moved


def save(engine: Any, root: Path, step: int, client_state: dict[str, Any], keep_last: int,
         barrier: Callable[[], None]) -> str:
    """Save a checkpoint of ``engine`` at ``step`` (call on every rank; ``barrier``
    waits for all of them)."""
    tag = tag_for(step)
    engine.save_checkpoint(str(root), tag=tag, client_state=client_state, save_latest=False)
    torch.save(rng_states(), root / tag / f"rng_rank{engine.global_rank:05d}.pt")
    barrier()
    if engine.global_rank == 0:
        state = {**client_state, "world_size": engine.dp_world_size}
        (root / tag / STATE).write_text(json.dumps(state, indent=1), encoding="utf-8")
        record_files(root / tag)
        atomic_write(root / LATEST, tag)
        # The newest steps are kept, and always the one just written.
        kept = {*tags(root)[-keep_last:], tag} if keep_last > 0 else set(tags(root))
        for old in tags(root):
            if old not in kept:
                shutil.rmtree(root / old, ignore_errors=True)
                shutil.rmtree(root / f"{old}{UNIVERSAL}", ignore_errors=True)
    barrier()
    return tag


def saved_world_size(directory: Path) -> int:
    """The number of data-parallel ranks a checkpoint was saved with."""
    state = directory / STATE
    if state.is_file():
        return int(json.loads(state.read_text(encoding="utf-8"))["world_size"])
    return len(list(directory.glob("*zero_pp_rank_*_mp_rank_*_optim_states.pt")))  # older checkpoints


def universal_copy(root: Path, tag: str, log_file: Path) -> str:
    """The tag of ``tag``'s DeepSpeed universal checkpoint (which reloads at any
    number of ranks), converting it first with DeepSpeed's ``ds_to_universal`` if
    that was not done before (call on one rank; the others wait)."""
    target = f"{tag}{UNIVERSAL}"
    if (root / target / FILES).is_file() and verify(root / target) is None:
        return target
    tmp = root / f".{target}.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    shutil.rmtree(root / target, ignore_errors=True)
    convert_to_universal(root / tag, tmp, log_file)
    (root / "latest_universal").unlink(missing_ok=True)  # the converter's own pointer; ours is LATEST
    record_files(tmp)
    os.replace(tmp, root / target)
    return target


def convert_to_universal(source: Path, target: Path, log_file: Path) -> None:
    """Run DeepSpeed's ``ds_to_universal`` on checkpoint directory ``source``
    (any ZeRO stage, the bf16 optimizer of ZeRO-1 included), writing ``target``:
    ``target/zero/<parameter name>/fp32.pt`` holds each full fp32 master weight."""
    command = [sys.executable, "-m", "deepspeed.checkpoint.ds_to_universal", "--input_folder", str(source),
               "--output_folder", str(target), "--inject_missing_state", "--num_extract_workers", "1",
               "--num_merge_workers", "1"]
    with open(log_file, "w", encoding="utf-8") as out:
        done = subprocess.run(command, stdout=out, stderr=subprocess.STDOUT, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{source}: DeepSpeed's universal conversion failed (exit {done.returncode}); "
                           f"its output is in {log_file}")


def load(engine: Any, root: Path, tag: str) -> dict[str, Any]:
    """Load ``tag`` into ``engine``; restore this rank's RNG; return the client
    state (data position, step)."""
    _, client_state = engine.load_checkpoint(str(root), tag=tag)
    if client_state is None:
        raise RuntimeError(f"{root / tag}: DeepSpeed could not load the checkpoint")
    # ZeRO wraps the torch optimizer; the wrapped one holds the per-parameter state.
    zero = engine.optimizer
    place_optimizer_state(getattr(zero, "optimizer", zero))
    rng_file = root / tag / f"rng_rank{engine.global_rank:05d}.pt"
    if rng_file.is_file():
        restore_rng_states(torch.load(rng_file, weights_only=False))
    return client_state
