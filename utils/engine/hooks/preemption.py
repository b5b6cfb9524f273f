"""Preemption hook: SIGTERM/SIGINT (a scheduler's notice, Ctrl-C) end the run at the next step with a checkpoint."""

from __future__ import annotations

from typing import Any

from utils.distributed.preempt import StopFlag
from utils.hook import Hook
from utils.registry import HOOKS


@HOOKS.register("preemption")
class PreemptionHook(Hook):
    """The signal only sets a flag; after each step all ranks agree on it (one small all-reduce
    under DDP), then ``state.preempted`` asks the checkpoint hook to save and the loop to stop."""

    name = "preemption"  # in logs and checkpoints
    priority = 30

    def __init__(self) -> None:
        self.flag = StopFlag()

    def before_train(self, trainer: Any) -> None:
        self.flag.install()

    def after_step(self, trainer: Any) -> None:
        if self.flag.agreed():
            trainer.state.preempted = self.flag.signum

    def close(self) -> None:
        self.flag.restore()
