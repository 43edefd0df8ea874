"""A scheduler's request to stop: SIGUSR1 (Slurm's ``--signal`` before the time
limit) or SIGTERM (preemption, ``scancel``) asks training for a checkpoint at the
next step boundary and a clean exit, after which the job script requeues the job.

Standard library only (and the package's constants), so that ``train.py`` installs
the handler before it imports torch (seconds during which a signal would otherwise
end the rank silently). The Slurm job step signals every process, DataLoader
workers included: they ignore these signals (:func:`ignore_in_worker`), so only the
ranks act on them.

Ctrl-C is not a request to checkpoint but the end of the command: :class:`CtrlC`
makes it an :class:`Interrupted` that the data build and training turn into their
one line and exit status 130, and :func:`ctrl_c_ends` the other commands. The data
build, which has nothing to checkpoint (its completed work units stay for
``--resume``), takes SIGTERM the same way (``CtrlC(sigterm=True)``: exit status 143).
:func:`uninterrupted` holds every one of these signals back for a few renames that
must happen together.
"""

from __future__ import annotations

import contextlib
import functools
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any

from . import EXIT_INTERRUPTED  # the package's __init__: constants only, no torch

SIGNALS = (signal.SIGUSR1, signal.SIGTERM)


class StopRequest:
    """Records that this process got SIGUSR1 or SIGTERM (the first one's name);
    the trainer checks it between steps, and the ranks agree on it there."""

    def __init__(self) -> None:
        self.signal_name: str | None = None

    @classmethod
    def install(cls) -> StopRequest:
        """A request that the handlers of :data:`SIGNALS` fill from now on."""
        request = cls()
        for sig in SIGNALS:
            signal.signal(sig, request._handle)
        return request

    @property
    def requested(self) -> bool:
        return self.signal_name is not None

    def _handle(self, signum: int, _frame: Any) -> None:
        if self.signal_name is None:
            self.signal_name = signal.Signals(signum).name


def ignore_in_worker(_worker_id: int) -> None:
    """A DataLoader ``worker_init_fn``: the worker ignores the scheduler's signals
    (its rank checkpoints and stops it; SIGUSR1's default would kill it first, and
    the rank with it)."""
    for sig in SIGNALS:
        signal.signal(sig, signal.SIG_IGN)


class Interrupted(KeyboardInterrupt):
    """Ctrl-C (SIGINT), raised by :class:`CtrlC`'s handler in place of the
    interpreter's own KeyboardInterrupt. CPython takes a KeyboardInterrupt raised
    in code that ``exec`` or ``eval`` runs from a string (a dataclass or namedtuple
    being defined: Beam imports much of itself only once the pipeline runs) for an
    unhandled one even after the command's ``main`` has caught it, and ``python -m`` then ends by
    killing itself with SIGINT: status -2, not 130. It marks the KeyboardInterrupt class
    itself only, not a subclass. ``signal_name``: SIGINT, or SIGTERM where the command
    takes that signal as the end too (``CtrlC(sigterm=True)``)."""

    def __init__(self, signal_name: str = "SIGINT") -> None:
        super().__init__()
        self.signal_name = signal_name


def _raise_interrupted(signum: int, frame: Any) -> None:
    raise Interrupted(signal.Signals(signum).name)


class CtrlC:
    """Within the block, SIGINT (and with ``sigterm``, SIGTERM: a scheduler's time
    limit or ``scancel`` for a command that has nothing to checkpoint, the data build)
    raises :class:`Interrupted` until :meth:`ignore`; on leaving, the handlers from
    before. A signal the process ignores (SIGINT, started in the background) stays
    ignored; outside the main thread (where Python sets handlers) nothing changes."""

    def __init__(self, sigterm: bool = False) -> None:
        self.signals = (signal.SIGINT, signal.SIGTERM) if sigterm else (signal.SIGINT,)
        self.previous: dict[int, Any] = {}

    def __enter__(self) -> CtrlC:
        if threading.current_thread() is threading.main_thread():
            for sig in self.signals:
                previous = signal.getsignal(sig)
                if previous not in (signal.SIG_IGN, None):
                    self.previous[sig] = previous
                    signal.signal(sig, _raise_interrupted)
        return self

    def ignore(self) -> None:
        for sig in self.previous:
            signal.signal(sig, signal.SIG_IGN)

    def __exit__(self, *exc_info: object) -> None:
        for sig, previous in self.previous.items():
            signal.signal(sig, previous)


@contextlib.contextmanager
def uninterrupted() -> Iterator[None]:
    """Hold Ctrl-C and the scheduler's signals back for the block, a few renames
    that must all happen (the old dataset or export set aside, the new one put in
    its place): a signal between them left neither in place. A signal that comes
    meanwhile is handled, by the handler it would have met, when the block ends.

    The Python handlers are swapped, not the signal mask: a process-directed signal
    goes to any thread that does not block it (Beam's, gRPC's), and CPython then
    runs the handler in the main thread all the same. Only the main thread sets
    handlers; elsewhere nothing changes."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    held: list[tuple[int, Any]] = []

    def hold(signum: int, frame: Any) -> None:
        if all(signum != seen for seen, _ in held):
            held.append((signum, frame))

    previous = {sig: signal.signal(sig, hold) for sig in (signal.SIGINT, *SIGNALS)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        for signum, frame in held:
            handler = previous[signum]
            if callable(handler):
                handler(signum, frame)  # Python's own SIGINT handler raises KeyboardInterrupt
            elif handler == signal.SIG_DFL:
                os.kill(os.getpid(), signum)  # what the signal would have done: end the process


def ctrl_c_ends(main: Callable[..., int]) -> Callable[..., int]:
    """A command's ``main`` for which Ctrl-C is one line, "interrupted", and exit
    status 130, not a traceback (the commands that write one file or directory:
    what they leave is the old output, never half a new one). The data build and
    training say more (what to resume) and handle it themselves."""
    @functools.wraps(main)
    def interruptible(*args: Any, **kwargs: Any) -> int:
        with CtrlC() as ctrl_c:
            try:
                return main(*args, **kwargs)
            except KeyboardInterrupt:
                ctrl_c.ignore()  # a second Ctrl-C does not cut the line short
                print("interrupted", file=sys.stderr)
                return EXIT_INTERRUPTED
    return interruptible
