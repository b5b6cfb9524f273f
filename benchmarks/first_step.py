"""A benchmark-only hook: prints when the first training step of a run has ended, then ends the process.

``custom_imports=[benchmarks.first_step] hooks=[{name: first_step_clock}]``; rank 0 prints
``first step done at <unix time>``. Every rank leaves at once (exit code 0): what follows the
first step is not what is measured.
"""

from __future__ import annotations

import os
import time
from typing import Any

from utils.hook import Hook
from utils.registry import HOOKS


@HOOKS.register("first_step_clock")
class FirstStepClock(Hook):
    def after_step(self, trainer: Any) -> None:
        if trainer.dist.is_main:
            print(f"first step done at {time.time():.6f}", flush=True)
        os._exit(0)


@HOOKS.register("first_step_time")
class FirstStepTime(Hook):
    """Prints when the first training step has ended, and lets the run go on (its validation and test)."""

    def __init__(self) -> None:
        self.printed = False

    def after_step(self, trainer: Any) -> None:
        if trainer.dist.is_main and not self.printed:
            print(f"first step done at {time.time():.6f}", flush=True)
            self.printed = True
