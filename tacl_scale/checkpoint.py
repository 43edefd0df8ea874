"""Checkpoints on top of DeepSpeed's: the data position and every rank's RNG
states beside the engine state, a record of every file with its size and checksum
(``files.json``; xxh3-128, sha256 in the records of earlier versions), and a
``latest`` pointer that is only moved once every rank has finished writing and the
record exists (so an interrupted save never becomes latest). On resume the newest
checkpoint whose files match their record is used; a truncated or corrupted one is
named and skipped.

A reader (an export) holds a shared ``flock`` on ``CHECKPOINT/.tacl-read-lock``
(:class:`ReadLock`) for as long as it reads; rotation takes it exclusively without
waiting and keeps, for a later rotation, any checkpoint a reader holds."""

from __future__ import annotations

import fcntl
import heapq
import json
import logging
import os
import random
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import torch

from .data.integrity import file_checksum
from .files import atomic_write, describe_os_error, file_sha256
from .run_dir import CHECKPOINT_RECORD, CHECKPOINT_STATE, LATEST

UNIVERSAL = ".universal"  # suffix of a checkpoint's DeepSpeed universal conversion
READ_LOCK = ".tacl-read-lock"  # in each checkpoint: shared-locked by its readers (ReadLock)
REMOVING = ".removing"  # suffix of a rotated checkpoint renamed away (``.stepNNNNNNNN.removing``) while deleted
_TAG = re.compile(r"^step\d{8}$")

log = logging.getLogger(__name__)


def tag_for(step: int) -> str:
    """The checkpoint tag (its directory's name) of ``step``: ``step00000030``."""
    return f"step{step:08d}"


def tags(root: Path) -> list[str]:
    """The checkpoint tags under ``root``, oldest first (universal copies excluded)."""
    return sorted(p.name for p in root.iterdir() if p.is_dir() and _TAG.match(p.name)) if root.is_dir() else []


def latest_tag(root: Path) -> str | None:
    """The tag of the last complete checkpoint under ``root``, if any. The pointer
    is a hint (:func:`newest_verified_tag` checks every checkpoint), so one that is
    not a tag (damaged, or some other file) is said and ignored."""
    pointer = root / LATEST
    if not pointer.is_file():
        return None
    try:
        tag = pointer.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as err:
        log.warning("%s: unreadable (%s): ignored, the checkpoints are searched instead", pointer, err)
        return None
    if not _TAG.match(tag):
        if tag:
            log.warning("%s: %r is not a checkpoint tag: ignored, the checkpoints are searched instead", pointer,
                        tag[:40])
        return None
    return tag if (root / tag).is_dir() else None


class SaveGroup(Protocol):
    """What a save needs of the process group (:class:`tacl_scale.distributed.Distributed`)."""

    rank: int
    world_size: int

    def barrier(self) -> None: ...

    def broadcast_object(self, value: Any) -> Any: ...

    def gather_objects(self, value: Any) -> list[Any]: ...


def recorded_files(directory: Path) -> dict[str, int]:
    """The files of checkpoint ``directory`` its record lists (every file below it but
    the record and the readers' lock), by path relative to it, with their sizes."""
    return {str(path.relative_to(directory)): path.stat().st_size for path in sorted(directory.rglob("*"))
            if path.is_file() and path.name not in (CHECKPOINT_RECORD, READ_LOCK)
            and not path.name.startswith(f".{CHECKPOINT_RECORD}.")}


def share_out(sizes: dict[str, int], ranks: int) -> list[list[str]]:
    """The files of ``sizes`` (name → bytes) dealt out to ``ranks`` ranks to checksum:
    each, the largest first, to the rank with the fewest bytes so far (ties: the lower
    rank), so every rank reads about as much whatever the files' sizes."""
    shares: list[list[str]] = [[] for _ in range(ranks)]
    loads = [(0, rank) for rank in range(ranks)]  # a heap of (bytes so far, rank)
    for name in sorted(sizes, key=lambda n: (-sizes[n], n)):
        load, rank = heapq.heappop(loads)
        shares[rank].append(name)
        heapq.heappush(loads, (load + sizes[name], rank))
    return shares


def checksum_files(directory: Path, names: list[str]) -> dict[str, dict[str, Any]]:
    """The record's entries of the files ``names`` of ``directory``: each one's size
    and checksum (``xxh3_128:<hex>``: every file is read whole at every save and again
    to resume, and sha256 took four times as long, a second of BERT-base's last save)."""
    return {name: {"bytes": (directory / name).stat().st_size, "checksum": file_checksum(directory / name)}
            for name in names}


def write_record(directory: Path, entries: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Write ``directory/files.json`` from ``entries`` (:func:`checksum_files`), by name; returns it."""
    files = dict(sorted(entries.items()))
    atomic_write(directory / CHECKPOINT_RECORD, json.dumps(files, indent=1))
    return files


def record_files(directory: Path) -> dict[str, dict[str, Any]]:
    """Write ``directory/files.json``: every file below it (:func:`recorded_files`)
    with its size and checksum, all read here; returns the record."""
    return write_record(directory, checksum_files(directory, list(recorded_files(directory))))


def record_problem(directory: Path) -> str | None:
    """What is wrong with checkpoint ``directory`` against its record (``files.json``:
    every file's size and checksum), naming the file; ``None`` when every file matches."""
    record = directory / CHECKPOINT_RECORD
    if not record.is_file():
        return f"{record}: missing (the save did not finish)"
    try:
        files = json.loads(record.read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        return f"{record}: unreadable: {err}"
    if not isinstance(files, dict) or not all(
            isinstance(entry, dict) and isinstance(entry.get("bytes"), int)
            and isinstance(entry.get("checksum", entry.get("sha256")), str) for entry in files.values()):
        return f"{record}: not a checkpoint record (an object of file -> its bytes and checksum)"
    for name, expected in files.items():
        path = directory / name
        if not path.is_file():
            return f"{path}: missing"
        size = path.stat().st_size
        if size != expected["bytes"]:
            return f"{path}: {size} bytes, {expected['bytes']} when saved (truncated or overwritten)"
        # Records written before the checksum was xxh3-128 hold a sha256.
        checksum, saved = ((file_checksum(path), expected["checksum"]) if "checksum" in expected
                           else (file_sha256(path), expected["sha256"]))
        if checksum != saved:
            return f"{path}: contents differ from when it was saved (checksum mismatch)"
    return None


def unrecorded_problem(directory: Path) -> str | None:
    """What can be checked of a checkpoint saved without a record (by a version
    that kept none): every torch file is a whole zip archive whose members match
    their CRC-32 (a truncated or bit-flipped file fails), and its trainer state
    reads. ``None`` when it passes, else what is wrong, naming the file."""
    try:
        read_trainer_state(directory)
    except ValueError as err:
        return str(err)
    for path in sorted(directory.rglob("*.pt")):
        try:
            with zipfile.ZipFile(path) as archive:
                bad = archive.testzip()
        except (OSError, zipfile.BadZipFile) as err:
            return f"{path}: not a whole torch file (truncated?): {err}"
        if bad is not None:
            return f"{path}: its member {bad} fails its CRC-32 check (corrupt)"
    return None


def _load_problem(directory: Path, latest: str | None) -> str | None:
    """``None`` when checkpoint ``directory`` may be loaded, else what is wrong
    (``latest``: the tag the pointer names; see :func:`newest_verified_tag`)."""
    if not (directory / CHECKPOINT_RECORD).exists():
        if directory.name == latest and not any(directory.glob(f".{CHECKPOINT_RECORD}.*")):
            problem = unrecorded_problem(directory)
            if problem is None:
                log.warning("%s has no %s (saved before checkpoints were verified): loading it unchecked",
                            directory, CHECKPOINT_RECORD)
            return problem
        return f"{directory / CHECKPOINT_RECORD}: missing (the save did not finish)"
    return record_problem(directory)


def newest_verified_tag(root: Path) -> tuple[str | None, list[str]]:
    """The newest checkpoint by step whose files verify, whatever ``latest`` says
    (a lost or stale pointer must not restart a run from an older step), and the
    problems of the newer ones (each names its file). A checkpoint with no record
    at all (saved by a version that kept none) is taken unchecked only when
    ``latest`` names it, and checked as far as it can be (:func:`unrecorded_problem`);
    otherwise it is a save that did not finish."""
    latest = latest_tag(root)
    problems = []
    for tag in reversed(tags(root)):
        problem = _load_problem(root / tag, latest)
        if problem is None:
            return tag, problems
        problems.append(problem)
    return None, problems


class CheckpointGone(FileNotFoundError):
    """The checkpoint directory is not there (any more): rotation removed it, or it
    never existed. The message names it."""


class ReadLock:
    """A shared lock on one checkpoint directory, held for as long as it is read
    (``with ReadLock(dir):`` or ``acquire()`` / ``release()``): rotation in
    :func:`save` does not remove a checkpoint a reader holds, it keeps it for a later
    rotation. An advisory ``flock`` (``LOCK_SH``, so readers share it) on
    ``DIR/.tacl-read-lock``, released by the kernel when the reader dies. The file
    stays (rotation removes it with its directory): unlinking a shared lock's file
    while another reader holds it would let rotation lock a new one.

    :meth:`acquire` raises :class:`CheckpointGone` when the directory is not there
    or was rotated away before the lock was taken; once it returns, the checkpoint
    stays until :meth:`release`. It waits only while a rotation is renaming the
    checkpoint away (moments)."""

    def __init__(self, directory: str | os.PathLike) -> None:
        self.directory = Path(directory)
        self.path = self.directory / READ_LOCK
        self._fd: int | None = None

    def acquire(self) -> ReadLock:
        """Take the shared lock, or raise :class:`CheckpointGone` if rotation removed
        the checkpoint first."""
        gone = CheckpointGone(f"{self.directory}: no such checkpoint directory")
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_CREAT, 0o666)
        except (FileNotFoundError, NotADirectoryError):
            raise gone from None
        except OSError as err:  # a read-only checkpoint saved before read locks: nothing to lock
            if not self.directory.is_dir():
                raise gone from None
            log.warning("%s: cannot take its read lock (%s): reading it unguarded, rotation may remove it meanwhile",
                        self.directory, err)
            return self
        try:
            fcntl.flock(fd, fcntl.LOCK_SH)
        except OSError as err:  # a filesystem without flock
            os.close(fd)
            if not self.directory.is_dir():
                raise gone from None
            log.warning("%s: cannot take its read lock (%s): reading it unguarded, rotation may remove it meanwhile",
                        self.directory, err)
            return self
        try:  # rotation renames a checkpoint away holding its lock: the lock taken after it is on that one
            here = os.stat(self.path)
            ours = os.fstat(fd)
            linked = (here.st_dev, here.st_ino) == (ours.st_dev, ours.st_ino)
        except OSError:
            linked = False
        if not linked:
            os.close(fd)
            raise CheckpointGone(f"{self.directory}: removed by checkpoint rotation before it could be locked")
        self._fd = fd
        return self

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # releases the flock
            self._fd = None

    def __enter__(self) -> ReadLock:
        return self.acquire()

    def __exit__(self, *_exc: object) -> None:
        self.release()


def lock_newest_verified(root: Path) -> tuple[ReadLock | None, list[str]]:
    """:func:`newest_verified_tag` for a reader: each candidate is read-locked
    (:class:`ReadLock`) before it is verified, so the checkpoint returned, with its
    lock held (``lock.directory``), stays until the lock is released. A candidate
    rotated away between the listing and its lock is not a problem: the listing is
    taken again, and the newer checkpoints that replaced it are looked at.
    ``(None, problems)`` when none verifies."""
    problems: list[str] = []
    rejected: set[str] = set()
    while True:
        latest = latest_tag(root)
        for tag in reversed(tags(root)):
            if tag in rejected:
                continue
            lock = ReadLock(root / tag)
            try:
                lock.acquire()
            except CheckpointGone:
                log.info("%s was removed by rotation before it could be read: taking the newest again", root / tag)
                rejected.add(tag)  # (each tag at most once: the loop ends)
                break
            problem = _load_problem(root / tag, latest)
            if problem is None:
                return lock, problems
            lock.release()
            problems.append(problem)
            rejected.add(tag)
        else:
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
         group: SaveGroup) -> str:
    """Save a checkpoint of ``engine`` at ``step`` (call on every rank of ``group``).
    Its files are checksummed for the record by all ranks, each a share
    (:func:`share_out`): rank 0 alone read the whole checkpoint (4.7 GB for BERT-large
    on many ranks) while every GPU waited."""
    tag = tag_for(step)
    if group.rank == 0 and ((root / tag).exists() or (root / f"{tag}{UNIVERSAL}").exists()):
        # A save killed midway (a node lost, SIGKILL at the time limit) left this step's files: a
        # job on another number of ranks would add its own beside them, and DeepSpeed's universal
        # conversion would count both jobs' ZeRO partitions. Its universal copy is of those files too.
        log.info("%s: an earlier job's, unfinished or passed over at resume: removed before this save", root / tag)
        _remove(root, tag)
    group.barrier()  # no rank writes into the directory before it is gone
    engine.save_checkpoint(str(root), tag=tag, client_state=client_state, save_latest=False)
    torch.save(rng_states(), root / tag / f"rng_rank{engine.global_rank:05d}.pt")
    group.barrier()
    shares = None
    if group.rank == 0:
        state = {**client_state, "world_size": engine.dp_world_size}
        (root / tag / CHECKPOINT_STATE).write_text(json.dumps(state, indent=1), encoding="utf-8")
        # Readers' lock file, made by the run: a reader without write access to the directory can still lock it.
        (root / tag / READ_LOCK).touch()
        shares = share_out(recorded_files(root / tag), group.world_size)
    mine = group.broadcast_object(shares)[group.rank]
    try:
        entries, problem = checksum_files(root / tag, mine), None
    except OSError as err:  # said by every rank below, none left waiting for this one
        entries, problem = {}, f"{err.filename or root / tag}: {describe_os_error(err)}"
    gathered = group.gather_objects((entries, problem))  # every rank's, after every rank's reads
    if problems := [problem for _, problem in gathered if problem is not None]:
        raise RuntimeError(f"a file of the checkpoint could not be read back for its record: {problems[0]}")
    if group.rank == 0:
        write_record(root / tag, {name: entry for share, _ in gathered for name, entry in share.items()})
        atomic_write(root / LATEST, tag)
        rotate(root, keep_last, tag)
    group.barrier()
    return tag


def rotate(root: Path, keep_last: int, written: str) -> list[str]:
    """Remove the checkpoints under ``root`` beyond the newest ``keep_last`` steps
    (0: none), never ``written`` (the one just saved), nor one a reader holds
    (:class:`ReadLock`): that one stays, and a later rotation removes it. Never
    waits. Returns the tags kept for their readers."""
    # A rotation killed while it deleted; a universal conversion killed while it wrote (resume makes
    # them before the first step, so none is being written now).
    for leftover in [*root.glob(f".step*{REMOVING}"), *root.glob(f".step*{UNIVERSAL}.tmp")]:
        shutil.rmtree(leftover, ignore_errors=True)
    if keep_last <= 0:
        return []
    kept = {*tags(root)[-keep_last:], written}
    held = []
    for old in tags(root):
        if old not in kept and not _remove_unless_read(root, old):
            log.info("kept checkpoint %s: an export is reading it (removed by a later rotation)", root / old)
            held.append(old)
    return held


def _remove_unless_read(root: Path, tag: str) -> bool:
    """Remove checkpoint ``tag`` (and its universal copy) unless a reader holds its
    :class:`ReadLock`; ``False`` when it is kept for its reader. Holding the lock
    exclusively, it renames the directory away: a reader that opened the lock file
    meanwhile finds it no longer at its path once the lock is free, and one that
    comes later finds no directory."""
    directory = root / tag
    fd = None
    for flags in (os.O_RDWR | os.O_CREAT, os.O_RDONLY):  # read-only: a lock file made by another user
        try:
            fd = os.open(directory / READ_LOCK, flags, 0o666)
            break
        except (FileNotFoundError, NotADirectoryError):
            break
        except OSError:
            continue
    try:
        if fd is not None:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return False
            except OSError as err:  # a filesystem without flock: removed as before read locks existed
                log.warning("%s: cannot lock it (%s): removed without checking for readers", directory, err)
        trash = _rename_away(root, tag)
    finally:
        if fd is not None:
            os.close(fd)  # before the removal: an open file would keep NFS from removing its directory
    shutil.rmtree(trash, ignore_errors=True)
    shutil.rmtree(root / f"{tag}{UNIVERSAL}", ignore_errors=True)
    return True


def _rename_away(root: Path, tag: str) -> Path:
    """Rename checkpoint ``tag`` to ``.tag.removing`` (which a killed removal leaves
    for :func:`rotate` to finish) and return where it now is."""
    trash = root / f".{tag}{REMOVING}"
    shutil.rmtree(trash, ignore_errors=True)
    try:
        os.rename(root / tag, trash)
    except OSError:  # gone already, or a filesystem that refuses: removed in place
        return root / tag
    return trash


def _remove(root: Path, tag: str) -> None:
    """Remove checkpoint ``tag`` and its universal copy, readers or not: it is being
    saved again, so it is one that did not finish or that resume passed over, which an
    export does not read either."""
    shutil.rmtree(_rename_away(root, tag), ignore_errors=True)
    shutil.rmtree(root / f"{tag}{UNIVERSAL}", ignore_errors=True)


def read_trainer_state(directory: Path) -> dict[str, Any] | None:
    """A checkpoint's ``trainer_state.json`` (None where there is none: checkpoints
    before it kept their state elsewhere), or a :class:`ValueError` naming it."""
    state = directory / CHECKPOINT_STATE
    if not state.is_file():
        return None
    try:
        saved = json.loads(state.read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise ValueError(f"{state}: unreadable (truncated?): {err}") from err
    if not isinstance(saved, dict) or not isinstance(saved.get("world_size"), int):
        raise ValueError(f"{state}: not a trainer state (an object with the world_size)")
    return saved


def saved_world_size(directory: Path) -> int:
    """The number of data-parallel ranks a checkpoint was saved with (a
    :class:`ValueError` naming its trainer state when that does not read)."""
    state = read_trainer_state(directory)
    if state is not None:
        return int(state["world_size"])
    return len(list(directory.glob("*zero_pp_rank_*_mp_rank_*_optim_states.pt")))  # older checkpoints


def universal_copy(root: Path, tag: str, log_file: Path) -> str:
    """The tag of ``tag``'s DeepSpeed universal checkpoint (which reloads at any
    number of ranks), converting it first with DeepSpeed's ``ds_to_universal`` if
    that was not done before (call on one rank; the others wait)."""
    target = f"{tag}{UNIVERSAL}"
    if (root / target / CHECKPOINT_RECORD).is_file() and record_problem(root / target) is None:
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
