"""Work-unit bookkeeping in a build's temporary directory (``OUTPUT/_tmp``): what
makes a killed build resumable, and the build-wide progress line.

- Each work unit spills into a part named after the unit (``part-<key>``), so a
  rerun finds it again. Once the part's files are closed and synced, a completion
  marker ``part-<key>.done.json`` records what the unit produced (the shards it
  touched, its skip counts, its documents). A part without a marker is incomplete
  and is discarded on resume.
- ``build.json`` records a fingerprint of everything that determines the parts (the
  build configuration and the list of units) and, for the progress line, the
  number and size of the units and when this run started.

The directory must be visible to every worker, as the spill parts already require;
the progress line counts markers there, so it spans worker processes and runners.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from .sources import WorkUnit

BUILD_RECORD = "build.json"
MARKER_SUFFIX = ".done.json"
PART_SUFFIXES = (".bin", ".idx", ".wstart.bin", ".wstart.idx", ".docs.jsonl")


def unit_key(unit: WorkUnit) -> str:
    """A stable name for a unit: the same file and byte range, the same key."""
    text = f"{unit.path}\x00{unit.format}\x00{unit.start}\x00{unit.stop}"
    return hashlib.blake2b(text.encode("utf-8"), digest_size=8).hexdigest()


def unit_bytes(unit: WorkUnit) -> int:
    """Input bytes of a unit (its byte range, or the whole file)."""
    return (unit.stop - unit.start) if unit.stop is not None else os.path.getsize(unit.path)


def part_prefix(tmp_dir: Path, unit: WorkUnit) -> Path:
    return tmp_dir / f"part-{unit_key(unit)}"


def _sync(path: Path) -> None:
    with open(path, "rb") as f:
        os.fsync(f.fileno())


def write_marker(prefix: Path, record: dict[str, Any]) -> None:
    """Mark a unit complete: sync its part's files, then write the marker by rename."""
    for suffix in PART_SUFFIXES:
        path = Path(f"{prefix}{suffix}")
        if path.exists():
            _sync(path)
    marker = Path(f"{prefix}{MARKER_SUFFIX}")
    tmp = Path(f"{marker}.tmp")
    tmp.write_text(json.dumps({**record, "finished_at": time.time()}), encoding="utf-8")
    _sync(tmp)
    os.replace(tmp, marker)


def read_marker(prefix: Path) -> dict[str, Any] | None:
    marker = Path(f"{prefix}{MARKER_SUFFIX}")
    if not marker.is_file():
        return None
    return json.loads(marker.read_text(encoding="utf-8"))


def completed_units(tmp_dir: Path) -> list[dict[str, Any]]:
    """The markers of every completed unit (what each produced)."""
    return [json.loads(m.read_text(encoding="utf-8")) for m in sorted(tmp_dir.glob(f"part-*{MARKER_SUFFIX}"))]


def fingerprint(config_dict: dict[str, Any], units: Iterable[WorkUnit]) -> str:
    """What the spill parts depend on: the build configuration (but whether an old
    dataset may be overwritten) and the units."""
    settings = json.loads(json.dumps(config_dict))
    settings.get("output", {}).pop("overwrite", None)
    text = json.dumps({"config": settings, "units": [unit_key(u) for u in units]}, sort_keys=True)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def start_run(tmp_dir: Path, digest: str, units: list[WorkUnit]) -> None:
    """Record this run of the build (a fresh one, or a resumed one)."""
    tmp_dir.mkdir(parents=True, exist_ok=True)
    record = {"fingerprint": digest, "units": len(units), "bytes": sum(unit_bytes(u) for u in units),
              "started": time.time()}
    (tmp_dir / BUILD_RECORD).write_text(json.dumps(record), encoding="utf-8")


def resumable(tmp_dir: Path, digest: str) -> str | None:
    """``None`` when the parts in ``tmp_dir`` belong to a build of the same
    settings and units, else why not."""
    record = tmp_dir / BUILD_RECORD
    if not record.is_file():
        return f"{record}: missing (no interrupted build of this version to resume)"
    if json.loads(record.read_text(encoding="utf-8")).get("fingerprint") != digest:
        return (f"{tmp_dir}: its parts were made with other settings or inputs; rerun the same command, or "
                "drop --resume to start over")
    return None


def discard_incomplete(tmp_dir: Path) -> tuple[int, int]:
    """Remove every file of ``tmp_dir`` but the completed parts, their markers and
    the build record; return (completed units kept, files removed)."""
    kept = {Path(str(m)[: -len(MARKER_SUFFIX)]).name for m in tmp_dir.glob(f"part-*{MARKER_SUFFIX}")}
    removed = 0
    for path in sorted(tmp_dir.iterdir()):
        if path.name == BUILD_RECORD or path.name.endswith(MARKER_SUFFIX):
            continue
        if path.is_file() and any(path.name == f"{name}{suffix}" for name in kept for suffix in PART_SUFFIXES):
            continue
        if path.is_dir():
            import shutil

            shutil.rmtree(path)
        else:
            path.unlink()
        removed += 1
    return len(kept), removed


def progress_line(tmp_dir: Path) -> str:
    """Units done of all, input MB done, this run's rate and the ETA (from the
    markers every worker leaves in ``tmp_dir``)."""
    record = json.loads((tmp_dir / BUILD_RECORD).read_text(encoding="utf-8"))
    markers = completed_units(tmp_dir)
    done_bytes = sum(m["bytes"] for m in markers)
    now = time.time()
    this_run = sum(m["bytes"] for m in markers if m["finished_at"] >= record["started"])
    rate = this_run / max(now - record["started"], 1e-9)
    remaining = record["bytes"] - done_bytes
    eta = f"ETA {remaining / rate:.0f} s" if rate > 0 and remaining > 0 else "ETA 0 s"
    return (f"work units {len(markers)}/{record['units']} done, {done_bytes / 1e6:.1f}/{record['bytes'] / 1e6:.1f} "
            f"MB of input, {rate / 1e6:.2f} MB/s, {eta}")
