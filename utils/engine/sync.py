"""The training loop's sync points: the only places it reads tensor values, and where ranks agree.

Between sync points a step reads nothing: its losses and, where the device
decided, whether its update was skipped, wait in a ``StepLog``. A sync point
reads them in one ``tolist()`` and replays them on the host: the epoch's
metrics, the loss window for the logs, steps the device skipped (taken back
from the LR schedule, the EMA's count and amp's count), the non-finite policy.
Sync points: every ``train.log_every`` steps, every ``train.sync_every`` steps
under DDP (there the ranks also agree, in one all-reduce, on a stop request
and on non-finite losses), before every checkpoint and at each epoch's end.
"""

from __future__ import annotations

import logging
import math
from typing import Any, List, Optional

import torch

from utils.distributed.ops import all_reduce_max
from utils.engine.nonfinite import NonFinitePolicy
from utils.engine.step_log import EpochMeter, LossWindow, StepLog, StepRecord
from utils.optim.schedules import rewind

log = logging.getLogger(__name__)


class HostSync:
    """The step log, its replay, and the once-per-step caches of the reads."""

    def __init__(self, nonfinite: NonFinitePolicy, world_size: int = 1, log_every: int = 10, sync_every: Optional[int] = None) -> None:
        self.nonfinite = nonfinite
        self.world_size, self.log_every, self.sync_every = world_size, log_every, sync_every or log_every
        self.steps = StepLog()  # the device values of the steps since the last sync
        self.window = LossWindow()
        self.meter = EpochMeter()
        self._synced = (-1, False)  # (state.step, agreed) of the last sync
        self._loss = (-1, math.nan)  # (state.step, value) of the last read_loss

    def new_epoch(self) -> None:
        self.meter = EpochMeter()

    def agrees(self, step: int) -> bool:
        """Whether the ranks agree after step ``step`` (every ``sync_every`` steps under DDP)."""
        return self.world_size > 1 and step % self.sync_every == 0

    def due(self, step: int) -> bool:
        """Whether step ``step`` ends with a sync point (a log step, or an agreement)."""
        return step % self.log_every == 0 or self.agrees(step)

    def sync(self, state: Any, parts: Any, agree: bool = False) -> None:
        """One read of the waiting values (and with ``agree`` under DDP one all-reduce), replayed on the host."""
        distributed = agree and self.world_size > 1
        if self._synced[0] == state.step and (self._synced[1] or not distributed):
            return
        packet = None
        if distributed:
            bad = self.steps.local_bad()
            bad = bad if bad is not None else torch.zeros(())
            packet = all_reduce_max(torch.stack([torch.full((), float(state.stop_request), device=bad.device), bad]))
        records, agreed = self.steps.read(packet)
        self._synced = (state.step, distributed)
        self._account(records, parts)
        self.nonfinite.review(records, peer_bad=bool(agreed) and agreed[1] > 0, scaled=parts.amp.scales_loss)
        if agreed and agreed[0] > 0:
            state.preempted = state.stop_request  # 0: another rank's signal

    def _account(self, records: List[StepRecord], parts: Any) -> None:
        for record in records:
            self.meter.add(record)
            self.window.add(record)
        skipped = [r for r in records if r.deferred and r.skipped]
        if not skipped:
            return
        # the host counted these steps as taken until now
        if not rewind(parts.scheduler, len(skipped)):
            log.warning("%d step(s) skipped on the device also advanced the LR schedule (%s cannot be rewound)", len(skipped), type(parts.scheduler).__name__)
        if parts.ema is not None:
            parts.ema.uncount(len(skipped))
        overflows = [r for r in skipped if r.bad_loss is None] if parts.amp.scales_loss else []
        if overflows:
            parts.amp.count_skipped(len(overflows), f" {len(overflows)}x in steps {overflows[0].step}..{overflows[-1].step}")

    def read_loss(self, state: Any, parts: Any) -> float:
        """The mean loss since the previous call, synced first; cached for the step."""
        if self._loss[0] != state.step:
            self.sync(state, parts)
            self._loss = (state.step, self.window.take())
        return self._loss[1]
