"""Preemption: SIGTERM/SIGINT ask the run to checkpoint at the next step and leave.

Schedulers (SLURM, Kubernetes, spot instances) send SIGTERM some time before
they kill a job. The handler only sets a flag; the training loop looks at it at
an optimizer-step boundary, where the state is consistent (``utils/engine/stop.py``):
after the step the signal arrived in, or under DDP at the loop's next agreement
of the ranks (every ``train.sync_every`` steps), so every rank stops after the
same step, even when the signal reached only some of them. The process then
exits with PREEMPTED_EXIT.
"""

from __future__ import annotations

import logging
import signal
from types import FrameType
from typing import Dict, Optional

log = logging.getLogger(__name__)

# 128 + SIGTERM: what a shell reports for a process ended by SIGTERM, so schedulers
# and torchrun treat the exit as "stopped on request", not as a bug of the run.
PREEMPTED_EXIT = 143
PEER_SIGNAL = 0  # the signal a rank stops for when only another rank received one


class Preempted(Exception):
    """Raised by the training loop after the preemption checkpoint was written."""

    def __init__(self, signum: int, checkpoint: Optional[str]) -> None:
        name = signal.Signals(signum).name if signum != PEER_SIGNAL else "a peer rank's signal"
        super().__init__(
            f"stopped by {name}; checkpoint '{checkpoint}' written; resume with --resume (or train.auto_resume=true)"
        )
        self.signum = signum


class StopFlag:
    """SIGTERM/SIGINT handlers that only set a flag (``install``/``uninstall``, or a context manager)."""

    def __init__(self, signals=(signal.SIGTERM, signal.SIGINT)) -> None:
        self.signals = signals
        self.signum = 0
        self._previous: Dict[int, object] = {}

    def _handler(self, signum: int, frame: Optional[FrameType]) -> None:
        if self.signum:  # a second signal: the user insists, stop without a checkpoint
            raise KeyboardInterrupt
        self.signum = signum
        log.warning(
            "received %s: saving a checkpoint at the next step boundary, then exiting with code %d",
            signal.Signals(signum).name,
            PREEMPTED_EXIT,
        )

    def install(self) -> "StopFlag":
        """Catch the signals from now on (the previous handlers are kept for ``uninstall``)."""
        for sig in self.signals:
            try:
                self._previous[sig] = signal.signal(sig, self._handler)
            except ValueError:  # not the main thread: signals cannot be caught here
                pass
        return self

    def uninstall(self) -> None:
        """Put the previous handlers back."""
        for sig, previous in self._previous.items():
            signal.signal(sig, previous)
        self._previous.clear()

    def __enter__(self) -> "StopFlag":
        return self.install()

    def __exit__(self, *exc) -> None:
        self.uninstall()
