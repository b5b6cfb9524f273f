"""Profiler hook: ``torch.profiler`` over a few training steps on rank 0, a Chrome/Perfetto trace, the top operators."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Optional

import torch

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
        activities = [torch.profiler.ProfilerActivity.CPU]
        if trainer.dist.device.type == "cuda":
            activities.append(torch.profiler.ProfilerActivity.CUDA)
            self.sort_by = "self_device_time_total"
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

    def _write(self, profiler: torch.profiler.profile) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        profiler.export_chrome_trace(str(self.trace_path))
        recorded = min(profiler.step_num, self.wait + self.warmup + self.active)
        first = self.wait + self.warmup
        table = profiler.key_averages().table(sort_by=self.sort_by, row_limit=self.top)
        log.info(
            "profiler: trace %s of training steps %d-%d (ProfilerStep#%d-#%d); top operators by self time:\n%s",
            self.trace_path, self.first_step + first + 1, self.first_step + recorded, first, recorded - 1, table,
        )

    def close(self) -> None:
        if self.profiler is not None:
            profiler, self.profiler = self.profiler, None
            profiler.stop()  # while recording (a run shorter than the schedule), this writes what it has
