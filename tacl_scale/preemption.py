"""A scheduler's request to stop: SIGUSR1 (Slurm's ``--signal`` before the time
limit) or SIGTERM (preemption, ``scancel``) asks training for a checkpoint at the
next step boundary and a clean exit, after which the job script requeues the job.

Standard library only, so that ``train.py`` installs the handler before it imports
torch (seconds during which a signal would otherwise end the rank silently). The
Slurm job step signals every process, DataLoader workers included: they ignore
these signals (:func:`ignore_in_worker`), so only the ranks act on them.

Ctrl-C is not a request to checkpoint but the end of the command: :class:`CtrlC`
makes it an :class:`Interrupted` that the data build and training turn into their
one line and exit status 130.
"""

from __future__ import annotations

import signal
import threading
from typing import Any

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
    itself only, not a subclass."""


def _raise_interrupted(signum: int, frame: Any) -> None:
    raise Interrupted()


class CtrlC:
    """Within the block, SIGINT raises :class:`Interrupted` until :meth:`ignore`; on
    leaving, the handler from before. Where the process ignores SIGINT (started in the
    background) or is not in its main thread (where Python sets handlers), nothing
    changes."""

    def __enter__(self) -> CtrlC:
        self.previous = signal.getsignal(signal.SIGINT)
        self.active = (threading.current_thread() is threading.main_thread()
                       and self.previous not in (signal.SIG_IGN, None))
        if self.active:
            signal.signal(signal.SIGINT, _raise_interrupted)
        return self

    def ignore(self) -> None:
        if self.active:
            signal.signal(signal.SIGINT, signal.SIG_IGN)

    def __exit__(self, *exc_info: object) -> None:
        if self.active:
            signal.signal(signal.SIGINT, self.previous)
