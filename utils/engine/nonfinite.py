"""What a NaN/inf loss does: stop the run, or skip the step up to a limit (``train.nonfinite``).

What was checked and where is the error's message; the run's own advice (its settings, its checkpoints) is
added where the run ends (``utils/commands/diverged.py``). No loss is read per step. The decision to skip a step stays on the device:
``poison_if_nonfinite`` turns every gradient of a non-finite loss into NaN, so the step's
finiteness check (which DDP's gradient averaging makes the same on every rank)
skips it; fused optimizers take that check as ``found_inf`` and skip the update
on the device, others need one read per step (``utils/amp/native.py``). The
host learns what happened at the next sync point, where ``replay`` replays the
steps in order: the warnings, the counts and the errors are those of a check
at every step, only later.
"""

from __future__ import annotations

import logging
import math
from typing import Dict, Sequence

import torch

from utils.engine.step_log import StepRecord
from utils.errors import NonFiniteError

log = logging.getLogger(__name__)


class NonFinitePolicy:
    """``train.nonfinite``: ``stop`` at the first NaN/inf loss, or ``skip`` the step, up to
    ``max_skips`` consecutive ones. The count survives epochs and resumes (``state_dict``)."""

    def __init__(self, mode: str = "stop", max_skips: int = 10) -> None:
        self.mode, self.max_skips, self.consecutive, self.total = mode, int(max_skips), 0, 0

    @property
    def skips(self) -> bool:
        return self.mode == "skip"

    def poison_if_nonfinite(self, loss: torch.Tensor) -> torch.Tensor:
        """The loss to backpropagate: under ``skip``, a non-finite loss makes every gradient NaN (no read)."""
        if not self.skips:
            return loss
        return loss * torch.where(torch.isfinite(loss.detach()), 1.0, math.nan)

    def replay(self, records: Sequence[StepRecord], peer_bad: bool = False, scaled: bool = False) -> None:
        """Replay the steps read at a sync point; raises NonFiniteError where a check at every step would have.

        ``peer_bad``: another rank reported a non-finite loss (the ranks agreed on it).
        ``scaled``: a loss scaler may skip steps for overflow; those are not counted here.
        """
        if not records:
            if peer_bad and not self.skips:
                raise NonFiniteError("another rank saw a NaN/inf loss (train.nonfinite=stop)")
            return
        span = f"steps {records[0].step}..{records[-1].step} were checked at step {records[-1].step + 1}"
        for record in records:
            bad = record.bad_loss
            if not self.skips:
                if bad is not None:
                    raise NonFiniteError(
                        f"loss is {bad} at epoch {record.epoch}, step {record.step} (train.nonfinite=stop); {span}"
                    )
                continue
            if record.skipped and (bad is not None or not scaled):
                self._skipped(record, bad)
            elif not record.skipped:
                self.consecutive = 0
        if peer_bad and not self.skips:
            raise NonFiniteError(f"another rank saw a NaN/inf loss in {span} (train.nonfinite=stop)")

    def _skipped(self, record: StepRecord, bad: object) -> None:
        self.consecutive += 1
        self.total += 1
        value = bad if bad is not None else record.losses[-1] if record.losses else math.nan
        if self.consecutive > self.max_skips:
            raise NonFiniteError(
                f"non-finite loss in {self.consecutive} consecutive steps at epoch {record.epoch}, step {record.step} "
                f"(train.max_nonfinite_skips={self.max_skips})"
            )
        log.warning(
            "loss is %s at epoch %d, step %d: step skipped (%d in a row, train.max_nonfinite_skips=%d)",
            value,
            record.epoch,
            record.step,
            self.consecutive,
            self.max_skips,
        )

    def state_dict(self) -> Dict[str, int]:
        return {"consecutive": self.consecutive, "total": self.total}

    def load_state_dict(self, state: Dict[str, int]) -> None:
        self.consecutive, self.total = int(state.get("consecutive", 0)), int(state.get("total", 0))
