"""Files written whole or not at all, their fingerprints, and what went wrong writing
one, in words: shared by data preparation, training and their tools."""

from __future__ import annotations

import errno
import hashlib
import json
import os
import re
import shutil
import uuid
from pathlib import Path
from typing import Any

FULL_DISK_ERRNOS = (errno.ENOSPC, errno.EDQUOT)
# A write that failed with this little room left failed for the room (libraries
# that write through C++ streams, such as torch.save, report no errno).
NEARLY_FULL_BYTES = 64 << 20
# How a library written in Rust (safetensors) gives the errno of a failed write in
# its own exception's message: "I/O error: No space left on device (os error 28)".
_RUST_OS_ERROR = re.compile(r"\(os error (\d+)\)")


def describe_os_error(err: OSError) -> str:
    """An OSError's cause in words, saying so when the disk is full."""
    cause = err.strerror or str(err)
    if err.errno in FULL_DISK_ERRNOS:
        cause += " (the disk is full)"
    return cause


def os_error_line(err: OSError, about: str | os.PathLike) -> str:
    """"FILE: CAUSE" for an OSError, FILE the one it names (else ``about``): not
    Python's "[Errno 2] No such file or directory: 'FILE'"."""
    return f"{err.filename or about}: {describe_os_error(err)}"


def free_bytes(path: str | os.PathLike) -> int | None:
    """Free bytes on the file system of ``path`` (its nearest existing folder)."""
    where = Path(path)
    while not where.exists() and where != where.parent:
        where = where.parent
    try:
        return shutil.disk_usage(where).free
    except OSError:
        return None


def first_line(err: BaseException) -> str:
    """An error's message cut to its first line (its class name when it has none):
    what a one-line ``error:`` shows of a library's multi-line message."""
    return (str(err).strip().splitlines() or [type(err).__name__])[0]


def describe_write_error(err: BaseException, path: str | os.PathLike) -> str:
    """Why writing under ``path`` failed: an OSError's cause, or, for an error
    without an errno (``RuntimeError: basic_ios::clear: iostream error``), "the
    disk is full" when its file system has almost no room left, else its first line."""
    if isinstance(err, OSError) and err.errno is not None:
        return describe_os_error(err)
    free = free_bytes(path)
    if free is not None and free < NEARLY_FULL_BYTES:
        return f"the disk is full ({free / 2**20:.0f} MiB free)"
    return first_line(err)


def write_failed(err: BaseException, path: str | os.PathLike, what: str,
                 scratch: str | os.PathLike | None = None) -> OSError:
    """``err``, raised while ``what`` (``"the export"``) was written to ``path``, as
    an OSError naming ``path`` whose cause says so ("the export could not be written:
    No space left on device"), for a command's ``except OSError`` to print in one
    line (:func:`os_error_line`; :func:`describe_os_error` adds "(the disk is full)").
    The errno is ``err``'s own, or for a library's own exception the one its message
    gives (safetensors' ``SafetensorError: Error while serializing: I/O error: No
    space left on device (os error 28)``); without one the cause is
    :func:`describe_write_error`'s. The cause names the file ``err`` names where
    neither it nor the file it was copied to (``filename2``) is ``path``, in it, or
    in ``scratch`` (the write's own temporary folder, gone once it failed): a file
    that could not be read, such as a tokenizer file the export copies."""
    code, cause, named = None, None, []
    if isinstance(err, OSError):
        # shutil's copies name both files (filename2: the one written) whichever failed.
        code, cause = err.errno, err.strerror
        named = [name for name in (err.filename, err.filename2) if isinstance(name, (str, bytes, os.PathLike))]
    if code is None and (found := _RUST_OS_ERROR.search(str(err))):
        code, cause = int(found.group(1)), None
    if code is None:
        cause = describe_write_error(err, path)
    cause = cause or os.strerror(code)
    if named and not any(_within(name, place) for name in named for place in (path, scratch) if place is not None):
        cause = f"{os.fsdecode(named[0])}: {cause}"
    return OSError(code, f"{what} could not be written: {cause}", os.fspath(path))


def _within(path: str | bytes | os.PathLike, folder: str | os.PathLike) -> bool:
    """Whether ``path`` is ``folder`` or inside it."""
    return Path(os.path.abspath(os.fsdecode(path))).is_relative_to(os.path.abspath(folder))


def json_object(path: str | os.PathLike) -> dict[str, Any] | None:
    """The JSON object in ``path``, or None: no such file, unreadable, not JSON, or
    JSON of another kind (for optional settings files, whose absence says nothing)."""
    try:
        settings = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return settings if isinstance(settings, dict) else None


def file_sha256(path: str | os.PathLike) -> str:
    """The sha256 of a file's bytes: the vocabulary fingerprint the manifest records
    (``tokenizer.sha256``), and the checksum of checkpoint files."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def under_a_file(path: str | os.PathLike) -> str | None:
    """"PATH: A is a file, not a directory" when the nearest existing ancestor A of
    ``path`` is not a directory, so nothing can be made at ``path`` (mkdir says only
    "File exists" or "Not a directory"); else None."""
    for ancestor in Path(path).parents:
        if ancestor.exists():
            return None if ancestor.is_dir() else f"{path}: {ancestor} is a file, not a directory"
    return None


def output_directory_problem(path: str | os.PathLike, role: str) -> str | None:
    """Why nothing can be written into the directory ``path``, in words naming it,
    or None: it is a file ("PATH: is a file, not ROLE"), or it is under one. Checked
    before any work, so a mistyped output costs no pass over the input."""
    if Path(path).exists() and not Path(path).is_dir():
        return f"{path}: is a file, not {role}"
    return under_a_file(path)


def output_file_problem(path: str | os.PathLike, overwrite: bool = False) -> str | None:
    """Why a command cannot write its output file at ``path``, in words naming it, or
    None: checked before the work, so a typo costs no corpus pass. A file already
    there is replaced only when ``overwrite`` (the command's ``--overwrite``): a
    mistyped output must not cost a user the dump or vocabulary it named."""
    target = Path(path)
    if target.is_dir():
        return f"{path}: is a directory; name the file to write"
    if (target.exists() or target.is_symlink()) and not overwrite:
        return f"{path}: already exists; pass --overwrite to replace it, or name another file"
    return under_a_file(path)


def cannot_write(path: str | os.PathLike, err: OSError) -> str:
    """"PATH: cannot write it: CAUSE", naming the file the error is about where
    that is another one (the parent folder that is a file, a temporary file)."""
    where = f" ({err.filename})" if err.filename and str(err.filename) != str(path) else ""
    return f"{path}: cannot write it: {describe_os_error(err)}{where}"


def atomic_write(path: str | os.PathLike, data: str | bytes, fsync: bool = False) -> Path:
    """Write ``path`` through a temporary file beside it and a rename: a reader (or
    a crash now) sees the old file or the new one, never half of one. ``fsync``
    makes the bytes durable before the rename."""
    target = Path(path)
    tmp = target.with_name(f".{target.name}.{uuid.uuid4().hex}.tmp")
    try:
        with open(tmp, "wb") as f:
            f.write(data.encode("utf-8") if isinstance(data, str) else data)
            if fsync:
                f.flush()
                os.fsync(f.fileno())
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
    return target
