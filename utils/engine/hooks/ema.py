"""EMA hook: after each step that changed the weights, the average moves towards them."""

from __future__ import annotations

from typing import Any

from utils.hook import Hook
from utils.registry import HOOKS


@HOOKS.register("ema")
class EmaHook(Hook):
    """Updates ``trainer.parts.ema`` (``train.ema``); validation evaluates it beside the weights."""

    name = "ema"  # in logs and checkpoints
    priority = 20

    def after_step(self, trainer: Any) -> None:
        state = trainer.state
        if state.step_taken is not False and trainer.parts.ema is not None:  # None: the device decided, step_skipped says
            trainer.parts.ema.update(trainer.parts.model, state.step_skipped)
