"""What went wrong writing a file, in words (shared by training and its tools)."""

from __future__ import annotations

import errno
import os
import shutil
from pathlib import Path

FULL_DISK_ERRNOS = (errno.ENOSPC, errno.EDQUOT)
# A write that failed with this little room left failed for the room (libraries
# that write through C++ streams, such as torch.save, report no errno).
NEARLY_FULL_BYTES = 64 << 20


def describe_os_error(err: OSError) -> str:
    """An OSError's cause in words, saying so when the disk is full."""
    cause = err.strerror or str(err)
    if err.errno in FULL_DISK_ERRNOS:
        cause += " (the disk is full)"
    return cause


def free_bytes(path: str | os.PathLike) -> int | None:
    """Free bytes on the file system of ``path`` (its nearest existing folder)."""
    where = Path(path)
    while not where.exists() and where != where.parent:
        where = where.parent
    try:
        return shutil.disk_usage(where).free
    except OSError:
        return None


def describe_write_error(err: BaseException, path: str | os.PathLike) -> str:
    """Why writing under ``path`` failed: an OSError's cause, or, for an error
    without an errno (``RuntimeError: basic_ios::clear: iostream error``), "the
    disk is full" when its file system has almost no room left, else its first line."""
    if isinstance(err, OSError) and err.errno is not None:
        return describe_os_error(err)
    free = free_bytes(path)
    if free is not None and free < NEARLY_FULL_BYTES:
        return f"the disk is full ({free / 2**20:.0f} MiB free)"
    return (str(err).strip().splitlines() or [type(err).__name__])[0]
