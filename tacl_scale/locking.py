"""An exclusive lock on a directory: a dataset being built, a run being trained.
The holder keeps it for as long as it works there; a second job on the same
directory is refused at once, in one line naming the holder (pid and host), and
never deletes or rotates away the first one's files. An advisory ``flock`` on
``DIR/.tacl-lock``, released by the kernel when the holder dies; the holder
removes the file when it is done, so a finished directory holds nothing of it; a
directory the lock made and nothing else wrote to (a job refused before it wrote
anything) goes with it."""

from __future__ import annotations

import contextlib
import fcntl
import os
import socket
import time
from pathlib import Path

LOCK_NAME = ".tacl-lock"


class LockedError(RuntimeError):
    """Another process holds the directory's lock; the message names it."""


class DirectoryLock:
    """``with DirectoryLock(dir, "build"):`` or ``acquire()`` / ``release()``."""

    def __init__(self, directory: str | os.PathLike, purpose: str) -> None:
        self.directory = Path(directory)
        self.path = self.directory / LOCK_NAME
        self.purpose = purpose
        self._fd: int | None = None
        self._made_directory = False
        self._made_parents: list[Path] = []  # innermost first: removed with the directory, when empty

    def acquire(self) -> DirectoryLock:
        """Take the lock or raise :class:`LockedError` naming its holder."""
        missing = self.directory.parent
        while not missing.exists():
            self._made_parents.append(missing)
            missing = missing.parent
        self.directory.parent.mkdir(parents=True, exist_ok=True)
        while True:
            try:
                self.directory.mkdir()
                self._made_directory = True
            except FileExistsError:
                pass
            except FileNotFoundError:  # a parent another holder had made went with its directory
                self.directory.parent.mkdir(parents=True, exist_ok=True)
                continue
            try:
                fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            except FileNotFoundError:  # a refused holder removed the directory it had made: make it again
                continue
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holding = _holder_line(fd)
                os.close(fd)
                raise LockedError(f"{self.directory}: in use by {holding}; wait for it to end (or stop it), then "
                                  "run this again") from None
            try:
                if os.stat(self.path).st_ino == os.fstat(fd).st_ino:
                    break
            except FileNotFoundError:
                pass
            os.close(fd)  # locked a file its holder removed on release: lock the one there now
        os.ftruncate(fd, 0)
        os.write(fd, f"{self.purpose} pid {os.getpid()} on {socket.gethostname()} since "
                     f"{time.strftime('%Y-%m-%d %H:%M:%S')}\n".encode())
        self._fd = fd
        return self

    def release(self) -> None:
        if self._fd is not None:
            # While still held: a job that opened it meanwhile sees it gone and retries. It may be
            # gone already, with its directory (a dataset swapped in place of the old one).
            self.path.unlink(missing_ok=True)
            if self._made_directory:
                with contextlib.suppress(OSError):  # not empty (the job wrote there), or gone
                    for directory in (self.directory, *self._made_parents):
                        directory.rmdir()
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> DirectoryLock:
        return self.acquire()

    def __exit__(self, *_exc: object) -> None:
        self.release()


def holder(directory: str | os.PathLike) -> str | None:
    """Who holds the :class:`DirectoryLock` of ``directory`` (its line: purpose, pid,
    host, since when), or None when no live process does (one that died released
    it with its file descriptors)."""
    try:
        fd = os.open(Path(directory) / LOCK_NAME, os.O_RDONLY)
    except (FileNotFoundError, NotADirectoryError):
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return _holder_line(fd)
    finally:
        os.close(fd)  # releases a lock this took
    return None


def _holder_line(fd: int) -> str:
    """What the holder wrote in the lock file open at ``fd``: purpose, pid, host, since when."""
    return os.read(fd, 512).decode("utf-8", "replace").strip() or "another process"
