"""Where a build's output goes: its own progress on the console, everything else
(Beam, its worker processes, Dask) in the runner log, ``OUTPUT.build.log``.

The runner log is written by one thread that drains a pipe. The driver's log
records and, unless ``--verbose``, its stdout and stderr (which worker processes
inherit) all go into the pipe, so nothing that logs ever writes to the log's disk
itself: a full disk, or one that fails, cannot block a worker or turn a log line
into an error of its own. What cannot be written is dropped, said once on the
console and once more when the build ends.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import BinaryIO

from .workspace import describe_os_error

FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
# How Beam's local runner relays a worker process's log record to the driver.
_RELAYED = re.compile(r'message: "(?P<message>(?:[^"\\]|\\.)*)".*log_location: "[^"]*/data_prep/', re.DOTALL)
_CLOSE_TIMEOUT_S = 10.0  # a process that still holds the pipe (a lingering worker) is not waited for longer


class ProjectRecords(logging.Filter):
    """On the console, only the build's own records: those of ``data_prep`` loggers,
    and the ones Beam relays from worker processes (shown as their message alone)."""

    def filter(self, record: logging.LogRecord) -> bool:
        """Keep ours; keep a relayed worker line, renamed to its message; drop the rest."""
        if record.name.startswith("data_prep"):
            return True
        relayed = _RELAYED.search(record.getMessage()) if record.name.startswith("apache_beam") else None
        if relayed is None:
            return False
        record.msg, record.args, record.name = relayed.group("message"), None, "data_prep.worker"
        return True


def log_file_for(output: str) -> Path:
    """Where the runner's and workers' own logs go: ``OUTPUT.build.log`` beside the output."""
    out = Path(output)
    return out.parent / f"{out.name}.build.log"


class RunnerLog:
    """The runner log file behind a pipe (see the module docstring). ``write_fd`` is
    the pipe's end to write to; ``warn`` is called once, from the draining thread,
    when the file first fails. The file (and its directory) is made when the first
    line arrives: a build refused before it logs anything (a missing input, a bad
    tokenizer) leaves nothing behind."""

    def __init__(self, path: Path, warn: Callable[[str], None]) -> None:
        self.path = path
        self.failure: str | None = None
        self.dropped_bytes = 0
        self.written = False  # whether any line arrived (and so the file was made, or failed)
        self._warn = warn
        self._read_fd, self.write_fd = os.pipe()
        self._file: BinaryIO | None = None
        self._thread = threading.Thread(target=self._drain, name="runner-log", daemon=True)
        self._thread.start()

    def _fail(self, err: OSError) -> None:
        self.failure = describe_os_error(err)
        self._warn(f"cannot write the runner log {self.path}: {self.failure}; its lines are dropped from here on")

    def _drain(self) -> None:
        with open(self._read_fd, "rb", buffering=0) as pipe:
            while chunk := pipe.read(1 << 16):
                if not self.written:
                    self.written = True
                    try:
                        self.path.parent.mkdir(parents=True, exist_ok=True)
                        self._file = open(self.path, "ab", buffering=0)
                    except OSError as err:
                        self._fail(err)
                if self._file is not None and self.failure is None:
                    try:
                        self._file.write(chunk)
                        continue
                    except OSError as err:
                        self._fail(err)
                self.dropped_bytes += len(chunk)

    def close(self) -> None:
        """End the pipe (every other copy of ``write_fd`` must be closed first) and
        wait for the log to be written."""
        os.close(self.write_fd)
        self._thread.join(_CLOSE_TIMEOUT_S)
        if self._file is not None and not self._thread.is_alive():
            with contextlib.suppress(OSError):
                self._file.close()

    def describe(self) -> str:
        """``runner log: PATH``, saying when it is incomplete (asked once ``written``)."""
        if self.failure is None:
            return f"runner log: {self.path}"
        return f"runner log: {self.path} (incomplete: {self.failure}; {self.dropped_bytes} bytes dropped)"


@contextlib.contextmanager
def build_logging(output: str, quiet: bool, verbose: bool) -> Iterator[RunnerLog]:
    """The build's own progress on the console; everything in the runner log.
    ``verbose`` shows everything on the console too; ``quiet`` only warnings and
    errors. Worker processes inherit the output descriptors, so during the build
    (unless ``verbose``) they point at the runner log's pipe while the console keeps
    a duplicate of the original stderr."""
    console_fd = os.dup(2)
    console = logging.StreamHandler(os.fdopen(console_fd, "w", buffering=1))
    console.setFormatter(logging.Formatter(FORMAT))
    console.setLevel(logging.WARNING if quiet else logging.INFO)
    if not verbose:
        console.addFilter(ProjectRecords())

    def warn(message: str) -> None:  # straight to the console: the pipe may be what failed
        console.handle(logging.makeLogRecord({"name": "data_prep.build", "levelno": logging.WARNING,
                                              "levelname": "WARNING", "msg": message}))

    runner_log = RunnerLog(log_file_for(output), warn)
    to_file = logging.StreamHandler(os.fdopen(os.dup(runner_log.write_fd), "w", buffering=1, encoding="utf-8"))
    to_file.setFormatter(logging.Formatter(FORMAT))
    root = logging.getLogger()
    saved = (root.level, list(root.handlers))
    root.setLevel(logging.INFO)
    root.handlers = [to_file, console]
    saved_fds = (os.dup(1), os.dup(2))
    try:
        if not verbose:
            sys.stdout.flush()
            sys.stderr.flush()
            os.dup2(runner_log.write_fd, 1)
            os.dup2(runner_log.write_fd, 2)
        yield runner_log
    finally:
        with contextlib.suppress(OSError, ValueError):
            sys.stdout.flush()
            sys.stderr.flush()
        os.dup2(saved_fds[0], 1)
        os.dup2(saved_fds[1], 2)
        for fd in saved_fds:
            os.close(fd)
        root.handlers = saved[1]
        root.setLevel(saved[0])
        to_file.close()
        with contextlib.suppress(OSError):
            to_file.stream.close()  # a handler leaves its stream open; the pipe ends once every copy is closed
        runner_log.close()
        console.close()
