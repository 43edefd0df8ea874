"""The build's workspace, ``OUTPUT/_tmp/``: everything a build writes before its
dataset exists, and what makes a killed build resumable. This module owns its names.

- ``part-<key>.*``: a work unit's spill part (tokenized documents, see
  :class:`data_prep.spill.SpillWriter`), named after the unit so that a rerun finds
  it again; each attempt of the unit writes ``part-<key>.attempt-<random>.*`` and
  links them to the part's names when they are finished and synced. Then a completion marker
  ``part-<key>.done.json`` records what the unit produced (the shards it touched,
  its skip counts, its documents) and the files it wrote, which are exactly the
  files that were synced. A part without a marker (or an attempt's files) is incomplete and is discarded
  on resume.
- ``build.json``: a fingerprint of the build configuration and the list of units,
  the settings themselves (so that a refused resume names the one that differs),
  each input's size and modification time and the tokenizer's sha256 (what
  determines the parts) and, for the progress line, the
  number and size of the units and when this run started.
- ``progress.last``: made by whichever work unit first finds every unit done, so
  that the build's last progress line is written once.
- ``shard-<random>/``: a shard being built; its finished files are renamed into
  the dataset directory.
- ``entries/<key>.json``: a built shard's manifest record.

The directory must be visible to every worker, as the spill parts already require;
the progress line counts markers there, so it spans worker processes and runners.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import re
import shutil
import time
import uuid
from collections.abc import Collection, Iterable, Iterator
from pathlib import Path
from typing import Any

from tacl_scale.data.manifest import (
    MANIFEST_NAME,
    SPLITS,
    TOKENIZER_DIR,
    ShardRecord,
    flat_settings,
    shard_name,
)
from tacl_scale.files import atomic_write, describe_os_error
from tacl_scale.locking import LOCK_NAME

from .inputs import WorkUnit

TMP_DIR_NAME = "_tmp"
BUILD_RECORD = "build.json"
MARKER_SUFFIX = ".done.json"
ENTRIES_DIR = "entries"
LAST_PROGRESS = "progress.last"
# Settings that do not change what a build makes: whether an old dataset may be
# replaced, how the inputs were spelled (a quoted glob, or the files the shell
# expanded it to) and where the tokenizer file is; the files the inputs expand to
# are compared instead (the units, and each input's path and size), and the
# tokenizer by its sha256.
NOT_DETERMINING = ("output.overwrite", "input.patterns", "tokenizer.path")
# A dataset's own files: its shards' (shard-NNNNN.*, validation-NNNNN.*), as shard_name names them.
_SHARD_FILE = re.compile("|".join(re.escape(shard_name(0, split)).replace("00000", r"\d{5}") + r"\..+"
                                  for split in SPLITS))


class OutputError(RuntimeError):
    """Writing the build's files failed; the message names the file or directory
    and the cause (a full disk says so)."""


class WorkspaceError(ValueError):
    """A record of the workspace (``build.json``, a unit's completion marker) cannot
    be read: emptied or cut short by a full disk, edited, damaged. The message names
    the file and says to start over (without ``--resume``), which clears the workspace."""


START_OVER = "drop --resume to start over"


def read_record(path: Path) -> dict[str, Any]:
    """A JSON record of the workspace (``build.json``, a completion marker);
    :class:`WorkspaceError` naming it when it cannot be read or is no JSON object. A
    ``FileNotFoundError`` is raised as it comes (callers tell a missing record apart)."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise
    except (OSError, UnicodeDecodeError) as err:
        why = describe_os_error(err) if isinstance(err, OSError) else f"not UTF-8: {err}"
        raise WorkspaceError(f"{path}: unreadable ({why}): {START_OVER}") from err
    if not text.strip():
        raise WorkspaceError(f"{path}: unreadable (empty): {START_OVER}")
    try:
        record = json.loads(text)
    except ValueError as err:
        raise WorkspaceError(f"{path}: unreadable (not JSON: {err}): {START_OVER}") from err
    if not isinstance(record, dict):
        kind = ("null" if record is None else "a boolean" if isinstance(record, bool) else "a number"
                if isinstance(record, int | float) else "a string" if isinstance(record, str) else "an array")
        raise WorkspaceError(f"{path}: unreadable (not a JSON object but {kind}): {START_OVER}")
    return record


@contextlib.contextmanager
def writing(where: str | os.PathLike) -> Iterator[None]:
    """Turn an OSError of the block (the build writing its files) into an
    :class:`OutputError` naming the file, or ``where`` when the error names none (a
    write to an open file that fails names nothing)."""
    try:
        yield
    except OSError as err:
        raise OutputError(f"{err.filename or where}: {describe_os_error(err)}") from err


def unit_key(unit: WorkUnit) -> str:
    """A stable name for a unit: the same file and byte range, the same key."""
    text = f"{unit.path}\x00{unit.format}\x00{unit.start}\x00{unit.stop}"
    return hashlib.blake2b(text.encode("utf-8"), digest_size=8).hexdigest()


def unit_bytes(unit: WorkUnit) -> int:
    """Input bytes of a unit (its byte range, or the whole file)."""
    return (unit.stop - unit.start) if unit.stop is not None else os.path.getsize(unit.path)


def is_build_file(path: Path) -> bool:
    """Whether an entry of a dataset directory is one a build writes (a shard's
    file, the tokenizer copy, the workspace, a manifest being written): what an
    unfinished build may leave, and what ``--overwrite`` removes. Never a user's file."""
    name = path.name
    return (name in (TMP_DIR_NAME, TOKENIZER_DIR, f".{TOKENIZER_DIR}.tmp", LOCK_NAME)
            or name.startswith(f".{MANIFEST_NAME}.") or _SHARD_FILE.fullmatch(name) is not None)


def remove_build_files(directory: str | os.PathLike, keep: Collection[str]) -> None:
    """Remove the entries of ``directory`` that a build writes (:func:`is_build_file`)
    but those named in ``keep``: the lock this build holds (``LOCK_NAME``) and, where
    the completed work units stay for a resume, the workspace (``TMP_DIR_NAME``). A
    user's file is never touched; an error (the directory gone, a file that will not
    go) is raised as it comes."""
    for path in Path(directory).iterdir():
        if path.name not in keep and is_build_file(path):
            shutil.rmtree(path) if path.is_dir() else path.unlink()


def _sync(path: Path) -> None:
    with open(path, "rb") as f:
        os.fsync(f.fileno())


def _sync_directory(path: Path) -> None:
    """Make the names in directory ``path`` durable (where the filesystem can: some
    network filesystems refuse to sync a directory, and sync their names anyway)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    except OSError as err:
        if err.errno not in (errno.EINVAL, errno.EBADF, errno.ENOTSUP):
            raise
    finally:
        os.close(fd)


class Workspace:
    """``OUTPUT/_tmp/`` of one build (see the module docstring)."""

    def __init__(self, output_dir: str | os.PathLike) -> None:
        self.root = Path(output_dir) / TMP_DIR_NAME

    def exists(self) -> bool:
        return self.root.is_dir()

    def remove(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)

    # -- work units -------------------------------------------------------------------------------------------

    def part_prefix(self, unit: WorkUnit) -> Path:
        """Where ``unit`` spills its documents."""
        return self.root / f"part-{unit_key(unit)}"

    def mark_done(self, prefix: Path, files: list[Path], record: dict[str, Any]) -> None:
        """Mark a unit complete: sync the ``files`` its part wrote and the directory
        (their names: a part's files get them by link or rename), then write the
        marker (naming them) by rename."""
        for path in files:
            _sync(path)
        _sync_directory(self.root)
        done = {**record, "files": sorted(p.name for p in files), "finished_at": time.time()}
        atomic_write(Path(f"{prefix}{MARKER_SUFFIX}"), json.dumps(done), fsync=True)

    def marker(self, prefix: Path) -> dict[str, Any] | None:
        """The marker of the unit spilling to ``prefix``, if it completed."""
        marker = Path(f"{prefix}{MARKER_SUFFIX}")
        if not marker.is_file():
            return None
        return read_record(marker)

    def completed_count(self) -> int:
        """How many units have their marker (a directory listing; no marker is read)."""
        with os.scandir(self.root) as entries:
            return sum(1 for e in entries if e.name.startswith("part-") and e.name.endswith(MARKER_SUFFIX))

    def completed_units(self) -> list[dict[str, Any]]:
        """The markers of every completed unit (what each produced);
        :class:`WorkspaceError` names one that cannot be read."""
        return [read_record(m) for m in sorted(self.root.glob(f"part-*{MARKER_SUFFIX}"))]

    # -- runs -------------------------------------------------------------------------------------------------

    def start_run(self, digest: str, units: list[WorkUnit], inputs: dict[str, list[int]],
                  tokenizer_sha256: str, settings: dict[str, Any] | None = None) -> None:
        """Record this run of the build (a fresh one, or a resumed one): what the
        parts depend on (:func:`fingerprint`, its ``settings`` as
        :func:`determining_settings` gives them, each input's size and mtime, the
        tokenizer's sha256) and, for the progress line, the units' count and size."""
        self.root.mkdir(parents=True, exist_ok=True)
        record = {"fingerprint": digest, "inputs": inputs, "tokenizer_sha256": tokenizer_sha256,
                  "units": len(units), "bytes": sum(unit_bytes(u) for u in units), "started": time.time()}
        if settings is not None:
            record["settings"] = settings
        atomic_write(self.root / BUILD_RECORD, json.dumps(record))

    def resume_problem(self, digest: str, inputs: dict[str, list[int]], tokenizer_sha256: str,
                  settings: dict[str, Any] | None = None, legacy_digest: str | None = None) -> str | None:
        """``None`` when the parts here were made by a build of the same settings
        and units from the same inputs and tokenizer (unchanged since), else why
        not, naming what changed: the first setting that differs (``settings``, as
        :func:`determining_settings` gives them) or an input only one build reads.
        ``legacy_digest``: this build's :func:`fingerprint` as versions that
        recorded no settings took it (the spelling of the inputs in), accepted
        from such a record. A ``build.json`` that cannot be read (empty, cut
        short, not JSON) is a reason too, naming it."""
        path = self.root / BUILD_RECORD
        try:
            record = read_record(path)
        except FileNotFoundError:
            return f"{path}: missing (no interrupted build of this version to resume)"
        except WorkspaceError as err:
            return str(err)
        again = "rerun the same command, or drop --resume to start over"
        recorded_settings = record.get("settings")
        by_settings = recorded_settings is not None and settings is not None
        if by_settings:
            if (difference := first_changed_setting(recorded_settings, settings)) is not None:
                name, then, now = difference
                return f"{self.root}: its parts were made with other settings ({name} {then!r}, this build's is {now!r}); {again}"
            recorded_inputs = record.get("inputs", {})
            if new := sorted(set(inputs) - set(recorded_inputs)):
                return (f"{new[0]}: an input of this build that the interrupted build did not read (its parts were "
                        f"made from other inputs); {again}")
            if gone := sorted(set(recorded_inputs) - set(inputs)):
                return (f"{gone[0]}: an input of the interrupted build that this build does not read (its parts "
                        f"were made from other inputs); {again}")
            if problem := _changed_input(record, inputs):  # before the units: a dump cut anew has other streams
                return problem
            if record.get("fingerprint") != digest:  # same settings and files, other units
                return (f"{self.root}: its parts were made from other work units of the same inputs (a multistream "
                        f"index beside a dump appeared, went or changed, or an earlier version read a large text "
                        f"file as one unit); {START_OVER}")
        elif record.get("fingerprint") not in (digest, legacy_digest):
            return f"{self.root}: its parts were made with other settings or inputs; {again}"
        if record.get("tokenizer_sha256") != tokenizer_sha256:
            return ("the tokenizer's file changed since the interrupted build (its sha256 differs): its parts hold "
                    "the old ids; drop --resume to start over")
        # With settings, the inputs' sizes and times were compared above, before the units.
        return None if by_settings else _changed_input(record, inputs)

    def discard_incomplete(self) -> tuple[int, int]:
        """Remove everything but the completed parts (the files their markers
        name), the markers and the build record; return (completed units kept,
        entries removed). Every marker is read before anything is removed: one
        that cannot be read (or names its files otherwise than as a list of names)
        is a :class:`WorkspaceError` naming it, and the workspace is left as it was."""
        keep = {BUILD_RECORD}
        markers = sorted(self.root.glob(f"part-*{MARKER_SUFFIX}"))
        for marker in markers:
            files = read_record(marker).get("files", [])
            if not (isinstance(files, list) and all(isinstance(name, str) for name in files)):
                raise WorkspaceError(f"{marker}: unreadable (its \"files\" is not a list of names): {START_OVER}")
            keep.add(marker.name)
            keep.update(files)
        removed = 0
        for path in sorted(self.root.iterdir()):
            if path.name in keep:
                continue
            shutil.rmtree(path) if path.is_dir() else path.unlink()
            removed += path.name != LAST_PROGRESS  # no part's: gone so that this run writes its own last line
        return len(markers), removed

    def units_done(self) -> tuple[int, int]:
        """(work units with a marker, work units of this run): a directory listing; no
        marker is read."""
        record = read_record(self.root / BUILD_RECORD)
        return self.completed_count(), record["units"]

    def all_units_done(self) -> bool:
        """Whether every work unit of this run has its marker (a directory listing;
        no marker is read)."""
        done, units = self.units_done()
        return done >= units

    def claim_last_progress(self) -> bool:
        """Whether the caller is the first to find every unit done, and so writes the
        build's last progress line: by an exclusive create, as the units that finish
        together, or that a resumed build reuses, each find them all done."""
        try:
            os.close(os.open(self.root / LAST_PROGRESS, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        except FileExistsError:
            return False
        return True

    def progress_line(self) -> str:
        """Units done of all, input MB done, this run's rate and the ETA (from the
        markers every worker leaves here)."""
        record = read_record(self.root / BUILD_RECORD)
        markers = self.completed_units()
        done_bytes = sum(m["bytes"] for m in markers)
        now = time.time()
        this_run = sum(m["bytes"] for m in markers if m["finished_at"] >= record["started"])
        rate = this_run / max(now - record["started"], 1e-9)
        remaining = record["bytes"] - done_bytes
        eta = f"ETA {remaining / rate:.0f} s" if rate > 0 and remaining > 0 else "ETA 0 s"
        return (f"work units {len(markers)}/{record['units']} done, {done_bytes / 1e6:.1f}/"
                f"{record['bytes'] / 1e6:.1f} MB of input, {rate / 1e6:.2f} MB/s, {eta}")

    # -- shards -----------------------------------------------------------------------------------------------

    def shard_scratch(self) -> Path:
        """A fresh directory to build one shard's files in."""
        path = self.root / f"shard-{uuid.uuid4().hex}"
        path.mkdir(parents=True, exist_ok=True)
        return path

    def write_entry(self, record: ShardRecord) -> None:
        """A built shard's manifest record, written by rename."""
        directory = self.root / ENTRIES_DIR
        directory.mkdir(parents=True, exist_ok=True)
        atomic_write(directory / f"{record.key}.json", json.dumps(record.to_json()))

    def entries(self) -> list[ShardRecord]:
        """The records of every shard built so far."""
        return [ShardRecord.from_json(json.loads(p.read_text(encoding="utf-8")))
                for p in sorted((self.root / ENTRIES_DIR).glob("*.json"))]


def _changed_input(record: dict[str, Any], inputs: dict[str, list[int]]) -> str | None:
    """Which input the interrupted build of ``record`` read at another size or
    modification time than ``inputs`` give now, in words, or None."""
    changed = [path for path, stat in inputs.items() if record.get("inputs", {}).get(path) != stat]
    if not changed:
        return None
    return (f"{changed[0]} changed since the interrupted build (size or modification time)"
            f"{f' (and {len(changed) - 1} more)' if len(changed) > 1 else ''}: drop --resume to start over")


def input_stats(units: Iterable[WorkUnit]) -> dict[str, list[int]]:
    """Each input file's size and modification time (ns): how a resume notices an
    input regenerated or edited in place since the parts were made."""
    stats = {}
    for path in sorted({u.path for u in units}):
        st = os.stat(path)
        stats[path] = [st.st_size, st.st_mtime_ns]
    return stats


def determining_settings(config_dict: dict[str, Any]) -> dict[str, Any]:
    """The settings of a build configuration (``BuildConfig.to_dict()``) that
    determine what it makes, as dotted names to JSON values: all but
    :data:`NOT_DETERMINING`."""
    return {name: value for name, value in flat_settings(config_dict).items() if name not in NOT_DETERMINING}


def first_changed_setting(recorded: dict[str, Any], ours: dict[str, Any]) -> tuple[str, Any, Any] | None:
    """The first setting of ``ours`` that ``recorded`` (both dotted names to JSON
    values, as :func:`determining_settings` gives them) holds otherwise or not at
    all: (name, recorded value or None, our value); ``None`` when none does."""
    for name, value in ours.items():
        if (then := recorded.get(name)) != value:
            return name, then, value
    return None


def fingerprint(config_dict: dict[str, Any], units: Iterable[WorkUnit], legacy: bool = False) -> str:
    """What the spill parts depend on: the build configuration's
    :func:`determining_settings` and the units (which name the files the inputs
    expand to, however they were spelled). ``legacy``: as versions that recorded no
    settings in ``build.json`` took it, the inputs' spelling in, to resume their parts."""
    if legacy:
        settings = json.loads(json.dumps(config_dict))
        settings.get("output", {}).pop("overwrite", None)
    else:
        settings = determining_settings(config_dict)
    text = json.dumps({"config": settings, "units": [unit_key(u) for u in units]}, sort_keys=True)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()
