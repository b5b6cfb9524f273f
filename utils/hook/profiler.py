"""Profiler hook: ``torch.profiler`` over a few training steps on rank 0, a Chrome/Perfetto trace, the top operators."""

from __future__ import annotations

import logging
import math
import os
from pathlib import Path
from typing import Any, Optional, Tuple

import torch

from utils.files.owned import check_file, make_dirs
from utils.hook import Hook

log = logging.getLogger(__name__)


class ProfilerHook(Hook):
    """``train.profile: {wait: 1, warmup: 1, active: 5}``: after ``wait`` steps and ``warmup``
    steps (profiled, then discarded), records ``active`` steps on rank 0 and writes
    ``<directory>/trace.json`` (open it in https://ui.perfetto.dev or chrome://tracing) and the
    ``top`` operators by self time to the log.

    The trace marks each step as ``ProfilerStep#k``: the k-th step of this process's training,
    counted from 0 (a resumed run counts from its first step too); the log names the
    training steps they are. Added by ``train.profile``; runs after the other hooks (priority 90), so a
    step's mark spans its ``run_step`` and the other hooks' ``after_step``.

    Training only: the schedule is fitted into the steps left in the first epoch (and in
    ``train.iterations``), and recording stops at the epoch's end, before its checkpoint and validation.
    """

    name = "profiler"  # in logs
    priority = 90

    def __init__(self, directory: str, wait: int = 1, warmup: int = 1, active: int = 5, top: int = 15) -> None:
        self.directory = Path(directory)
        self.wait, self.warmup, self.active, self.top = wait, warmup, active, top
        self.profiler: Optional[torch.profiler.profile] = None
        self.first_step = 0
        self.sort_by = "self_cpu_time_total"

    @property
    def trace_path(self) -> Path:
        return self.directory / "trace.json"

    def before_train(self, trainer: Any) -> None:
        if not trainer.dist.is_main:
            return
        steps = steps_ahead(trainer)
        fitted = fit_schedule(self.wait, self.warmup, self.active, steps)
        if fitted != (self.wait, self.warmup, self.active):
            log.info(
                "train.profile: %d training step(s) left in this epoch (and train.iterations); "
                "profiling wait=%d warmup=%d active=%d",
                steps,
                *fitted,
            )
            self.wait, self.warmup, self.active = fitted
        activities = [torch.profiler.ProfilerActivity.CPU]
        if trainer.dist.device.type == "cuda":
            activities.append(torch.profiler.ProfilerActivity.CUDA)
            self.sort_by = "self_device_time_total"
        elif not torch.cuda.is_available():
            # the profiler's C++ library logs to stderr that it found no GPU (and when it starts and stops) on
            # every CPU-only run; it reads its level when first used, and a user's own setting stays
            os.environ.setdefault("KINETO_LOG_LEVEL", "6")
        schedule = torch.profiler.schedule(wait=self.wait, warmup=self.warmup, active=self.active, repeat=1)
        self.profiler = torch.profiler.profile(activities=activities, schedule=schedule, on_trace_ready=self._write)
        self.first_step = trainer.state.step
        self.profiler.start()

    def after_step(self, trainer: Any) -> None:
        if self.profiler is None:
            return
        self.profiler.step()
        if self.profiler.step_num >= self.wait + self.warmup + self.active:
            self.close()  # the trace is written: stop recording for the rest of the run

    def after_epoch(self, trainer: Any) -> None:
        self.close()  # still recording (a schedule longer than the epoch): the checkpoint and validation are not training

    def _write(self, profiler: torch.profiler.profile) -> None:
        make_dirs(self.directory.parent, self.directory)  # a link at profile/ is refused
        profiler.export_chrome_trace(str(check_file(self.directory, self.trace_path)))  # by name: a link removed first
        recorded = min(profiler.step_num, self.wait + self.warmup + self.active)
        first = self.wait + self.warmup
        if recorded <= first:  # stopped while waiting or warming up: no step recorded (close() says so)
            return
        table = profiler.key_averages().table(sort_by=self.sort_by, row_limit=self.top)
        log.info(
            "profiler: trace %s of training steps %d-%d (ProfilerStep#%d-#%d); top operators by self time:\n%s",
            self.trace_path,
            self.first_step + first + 1,
            self.first_step + recorded,
            first,
            recorded - 1,
            table,
        )

    def close(self) -> None:
        if self.profiler is not None:
            profiler, self.profiler = self.profiler, None
            profiler.stop()  # while recording (a run shorter than the schedule), this writes what it has
            if profiler.step_num <= self.wait + self.warmup:
                log.warning(
                    "profiler: training ended after %d step(s), before the profiled steps (train.profile wait=%d, warmup=%d); "
                    "no trace written",
                    profiler.step_num,
                    self.wait,
                    self.warmup,
                )


def steps_ahead(trainer: Any) -> Optional[int]:
    """The optimizer steps left in the current epoch, within ``train.iterations``; None when the loader has no length."""
    try:
        batches = len(trainer.parts.train_loader)
    except TypeError:  # an iterable dataset without a length
        return None
    train = (trainer.meta.config or {}).get("train", {})
    accumulate = max(int(train.get("accumulate") or 1), 1)
    left = math.ceil((batches - trainer.state.batch) / accumulate)
    if left <= 0:  # resumed at an epoch's end: the next epoch is the one profiled
        left = math.ceil(batches / accumulate)
    if train.get("iterations") is not None:
        left = min(left, int(train["iterations"]) - trainer.state.step)
    return max(left, 1)


def fit_schedule(wait: int, warmup: int, active: int, steps: Optional[int]) -> Tuple[int, int, int]:
    """``(wait, warmup, active)`` within ``steps`` steps, at least one of them recorded: the wait shrinks
    first, then the warm-up, then the recorded steps."""
    if steps is None or wait + warmup + active <= steps:
        return wait, warmup, active
    wait = max(0, min(wait, steps - warmup - active))
    warmup = max(0, min(warmup, steps - wait - 1))
    return wait, warmup, max(1, min(active, steps - wait - warmup))
