"""Step accounting: what the training loop leaves on the device, read back at sync points.

Reading a tensor's value makes the host wait for the device, so a step reads
nothing: its micro-batch losses and, where a fused optimizer decided on the
device, whether its update was skipped, wait in a ``StepLog``. A sync point
reads them in one ``tolist()`` and replays them on the host, in step order:

======================  =============================================================
what is replayed        where it goes
======================  =============================================================
losses                  the epoch's metrics (``EpochMeter``), the log window (``LossWindow``)
non-finite losses       ``train.nonfinite`` (``NonFinitePolicy.replay``: warnings, limits, errors)
steps the device        every observer registered with ``on_skipped``: the LR schedule
skipped                 rewinds, the EMA uncounts, amp counts overflows (the host counted
                        those steps as taken until the sync)
stop requests           under DDP, in the same all-reduce: ``StopSignal.agree``
======================  =============================================================

Sync points: every ``train.log_every`` steps (the log steps), every
``train.sync_every`` steps under DDP (the agreement steps: the ranks also agree,
in one all-reduce, on stop requests and non-finite losses), before every
checkpoint and at each epoch's end. The trainer calls ``record_micro_batch``,
``end_step``, ``sync_if_due`` and ``epoch_metrics``; nothing else reaches inside.
"""

from __future__ import annotations

import logging
import math
from typing import Any, Callable, Dict, List, Optional, Sequence

import torch

from utils.amp.outcome import StepOutcome, StepResult
from utils.distributed.ops import all_reduce_max
from utils.engine.nonfinite import NonFinitePolicy
from utils.engine.step_log import EpochMeter, LossWindow, StepLog, StepRecord
from utils.engine.stop import StopSignal

log = logging.getLogger(__name__)

SkipObserver = Callable[[Sequence[StepRecord]], None]


class StepAccounting:
    """The step log, its replay at sync points, and the once-per-step caches of the reads."""

    def __init__(
        self,
        nonfinite: NonFinitePolicy,
        stop: StopSignal,
        log_every: int = 10,
        sync_every: int = 0,
        scales_loss: bool = False,
    ) -> None:
        self.nonfinite, self.stop = nonfinite, stop
        self.world_size = stop.world_size
        self.log_every, self.sync_every = log_every, sync_every or log_every
        self._pending = StepLog()  # the device values of the steps since the last sync
        self._window = LossWindow()
        self._meter = EpochMeter()
        self._resumed: Optional[Dict[str, Any]] = None  # a checkpoint's meter, for the epoch it was taken in
        self._observers: List[SkipObserver] = []
        self.scales_loss = scales_loss  # a loss scaler may skip steps for overflow (not counted as non-finite losses)
        self._synced = (-1, False)  # (step, agreed) of the last sync
        self._loss = (-1, math.nan)  # (step, value) of the last read_loss

    def on_skipped(self, observer: SkipObserver) -> None:
        """Call ``observer(records)`` with the steps the device skipped, once a sync point reads them."""
        self._observers.append(observer)

    # -- what a step leaves -----------------------------------------------------------------

    def start_epoch(self, epoch: int) -> None:
        """A new epoch's meter, unless a resume restored the meter of ``epoch`` (a checkpoint inside it)."""
        resumed, self._resumed = self._resumed, None
        self._meter = EpochMeter.resumed(resumed) if resumed is not None and resumed["epoch"] == epoch else EpochMeter()

    def state_dict(self) -> Dict[str, Any]:
        """The sums behind the logged values: the epoch meter's and the log window's (a checkpoint syncs first:
        every step before it is in), and the world size whose rank 0 added them."""
        return {
            "epoch_meter": self._meter.state_dict(),
            "loss_window": self._window.state_dict(),
            "world_size": self.world_size,
        }

    def load_state_dict(self, state: Dict[str, Any]) -> None:
        self._resumed = state.get("epoch_meter")
        window = state.get("loss_window")
        self._window = LossWindow.resumed(window) if window is not None else LossWindow()
        if window is None:  # a checkpoint written before the window was kept
            log.info(
                "the checkpoint holds no log window (an older framework wrote it): the first train/loss after the "
                "resume is the mean of the steps since the resume only"
            )
        saved = state.get("world_size", self.world_size)
        if saved != self.world_size:
            # train/loss is rank 0's share of each batch: another share from here on, nothing to convert it
            log.info(
                "world size %d -> %d: train/loss and the epoch's train loss are means over rank 0's share of each "
                "batch (1/%d of it before the resume, 1/%d after), so the values logged across the resume mix both",
                saved,
                self.world_size,
                saved,
                self.world_size,
            )

    def poison_if_nonfinite(self, loss: torch.Tensor) -> torch.Tensor:
        """The loss to backpropagate (``train.nonfinite=skip``: a non-finite one makes every gradient NaN)."""
        return self.nonfinite.poison_if_nonfinite(loss)

    def record_micro_batch(self, loss: torch.Tensor, samples: int) -> None:
        """A micro-batch's loss (stays on the device until the next sync point)."""
        self._pending.add_loss(loss, samples)

    def end_step(self, epoch: int, step: int, outcome: StepOutcome) -> None:
        """Close step ``step``: its result, decided on the host or (``ON_DEVICE``) by the device."""
        on_device = outcome.result is StepResult.ON_DEVICE
        self._pending.end_step(epoch, step, outcome.found_inf if on_device else outcome.result is StepResult.SKIPPED)

    # -- sync points ------------------------------------------------------------------------

    def is_agreement_step(self, step: int) -> bool:
        """Whether the ranks agree after step ``step`` (every ``sync_every`` steps under DDP)."""
        return self.world_size > 1 and step % self.sync_every == 0

    def is_sync_step(self, step: int) -> bool:
        """Whether step ``step`` ends with a sync point (a log step, or an agreement step)."""
        return step % self.log_every == 0 or self.is_agreement_step(step)

    def sync_if_due(self, step: int) -> None:
        """The sync point that step ``step`` ends with, if any; alone, a stop request ends the run here."""
        if self.is_sync_step(step):
            self.sync(step, agree=self.is_agreement_step(step))
        self.stop.agree_alone()

    def sync(self, step: int, agree: bool = False) -> None:
        """One read of the waiting values (with ``agree`` under DDP, one all-reduce), replayed on the host.

        May raise NonFiniteError, where a check at every step would have."""
        distributed = agree and self.world_size > 1
        if self._synced[0] == step and (self._synced[1] or not distributed):
            return
        packet = None
        if distributed:
            bad = self._pending.local_bad()
            bad = bad if bad is not None else torch.zeros(())
            packet = all_reduce_max(torch.stack([torch.full((), float(self.stop.requested), device=bad.device), bad]))
        records, agreed = self._pending.read(packet)
        self._synced = (step, distributed)
        self._replay(records)
        self.nonfinite.replay(records, peer_bad=bool(agreed) and agreed[1] > 0, scaled=self.scales_loss)
        if agreed:
            self.stop.agree(agreed[0] > 0)

    def _replay(self, records: List[StepRecord]) -> None:
        for record in records:
            self._meter.add(record)
            self._window.add(record)
        skipped = [r for r in records if r.deferred and r.skipped]
        if skipped:
            for observer in self._observers:
                observer(skipped)

    # -- what the host reads ----------------------------------------------------------------

    def read_loss(self, step: int) -> float:
        """The mean loss since the previous call, synced first; cached for the step."""
        if self._loss[0] != step:
            self.sync(step)
            self._loss = (step, self._window.take())
        return self._loss[1]

    def epoch_metrics(self, skipped_steps: int) -> Dict[str, float]:
        """The epoch's training metrics; call after the epoch's last sync point (its last steps read)."""
        return self._meter.result(skipped_steps)
