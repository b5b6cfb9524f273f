"""Preemption hook: SIGTERM/SIGINT (a scheduler's notice, Ctrl-C) end the run at the next step with a checkpoint."""

from __future__ import annotations

from typing import Any

from utils.distributed.preempt import StopFlag
from utils.hook import Hook
from utils.registry import HOOKS


@HOOKS.register("preemption")
class PreemptionHook(Hook):
    """The signal only sets a flag. In one process the step it arrived in ends with
    ``state.preempted`` set: the checkpoint hook saves and the loop stops. Under DDP it becomes
    ``state.stop_request``, which the ranks agree on at the loop's next agreement (every
    ``train.sync_every`` steps, in the all-reduce that also carries the NaN checks), so no
    collective runs per step; then every rank stops after the same step."""

    name = "preemption"  # in logs and checkpoints
    priority = 30

    def __init__(self) -> None:
        self.flag = StopFlag()

    def before_train(self, trainer: Any) -> None:
        self.flag.install()

    def after_step(self, trainer: Any) -> None:
        if not self.flag.signum:
            return
        if trainer.options.world_size == 1:
            trainer.state.preempted = self.flag.signum
        else:
            trainer.state.stop_request = self.flag.signum

    def close(self) -> None:
        self.flag.restore()
