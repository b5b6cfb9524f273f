"""The stop signal: SIGTERM/SIGINT end the run after the same optimizer step on every rank, with a checkpoint.

The handler only records the signal (``StopFlag``). In one process the step it
arrived in is the last one. Under DDP the ranks agree on it at the loop's next
agreement (every ``train.sync_every`` steps, in the all-reduce that also
carries the non-finite checks, ``accounting.py``), so no collective runs per
step and every rank stops after the same step, even when the signal reached
only some of them.
"""

from __future__ import annotations

from typing import Optional

from utils.distributed.preempt import PEER_SIGNAL, StopFlag


class StopSignal:
    """``requested``: the signal this process received (0: none); ``agreed``: the signal every rank stops
    for once they agreed (``PEER_SIGNAL`` when only another rank received one), None until then."""

    def __init__(self, world_size: int = 1) -> None:
        self.world_size = world_size
        self.flag = StopFlag()
        self.agreed: Optional[int] = None

    @property
    def requested(self) -> int:
        return self.flag.signum

    def install(self) -> None:
        self.flag.install()

    def uninstall(self) -> None:
        """The signal handlers from before ``install``."""
        self.flag.uninstall()

    def agree_alone(self) -> None:
        """Alone, a received signal is agreed at once (the run ends after this step); with peers, ``agree`` decides."""
        if self.world_size == 1 and self.requested and self.agreed is None:
            self.agreed = self.requested

    def agree(self, any_rank_requested: bool) -> None:
        """The ranks' agreement: when any of them received a signal, all stop."""
        if any_rank_requested and self.agreed is None:
            self.agreed = self.requested or PEER_SIGNAL
