"""A scheduler's request to stop: SIGUSR1 (Slurm's ``--signal`` before the time
limit) or SIGTERM (preemption, ``scancel``) asks training for a checkpoint at the
next step boundary and a clean exit, after which the job script requeues the job.

Standard library only, so that ``train.py`` installs the handler before it imports
torch (seconds during which a signal would otherwise end the rank silently). The
Slurm job step signals every process, DataLoader workers included: they ignore
these signals (:func:`ignore_in_worker`), so only the ranks act on them.
"""

from __future__ import annotations

import signal
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
