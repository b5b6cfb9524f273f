"""The validator: evaluate the model (and its EMA) on the val split, track the best epoch, stop early.

The trainer calls it after an epoch's checkpoint is written (``Trainer.fit``),
so a failure here never loses the epoch's training: ``pending`` names the
epoch whose validation is due, is saved in that checkpoint, and a resume runs
a validation that did not finish before it continues.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from typing import Any, Dict, Optional

from utils.distributed.parallel import without_ddp
from utils.distributed.replicas import broadcast_buffers
from utils.errors import ConfigError

log = logging.getLogger(__name__)


def monitored_value(results: Dict[str, float], monitor: str) -> float:
    """``results[monitor]``, or a ConfigError that lists what the evaluation reported."""
    if monitor not in results:
        raise ConfigError(f"eval.monitor: validation reported no '{monitor}'; it reported {sorted(results)} (eval.use_ema adds the ema_ prefix)")
    return results[monitor]


class BestTracker:
    """Remembers the best value of the monitored metric and counts evaluations since.

    With ``patience`` P, training stops after P evaluations in a row without a
    strict improvement (with ``eval.every`` 1: P epochs).
    """

    def __init__(self, metric: str, mode: str = "max", patience: Optional[int] = None) -> None:
        self.metric = metric
        self.sign = 1.0 if mode == "max" else -1.0
        self.patience = patience
        self.value: Optional[float] = None
        self.epoch: Optional[int] = None
        self.evals_since_best = 0

    def update(self, value: float, epoch: int) -> bool:
        """Record one evaluation; True when it is the new best. A NaN value is never the best (it counts
        as no improvement), and any number beats a NaN kept by an earlier version."""
        if math.isnan(value):
            self.evals_since_best += 1
            return False
        if self.value is None or math.isnan(self.value) or self.sign * value > self.sign * self.value:
            self.value, self.epoch, self.evals_since_best = value, epoch, 0
            return True
        self.evals_since_best += 1
        return False

    @property
    def should_stop(self) -> bool:
        return self.patience is not None and self.evals_since_best >= self.patience

    def state_dict(self) -> Dict[str, Any]:
        return {"metric": self.metric, "value": self.value, "epoch": self.epoch, "evals_since_best": self.evals_since_best}

    def load_state_dict(self, state: Dict[str, Any]) -> None:
        self.value, self.epoch = state["value"], state["epoch"]
        self.evals_since_best = int(state.get("evals_since_best", 0))


@dataclass
class Validation:
    """One validation's outcome."""

    epoch: int
    metrics: Dict[str, float]
    is_best: bool
    should_stop: bool


class Validator:
    """Validates every ``every`` epochs and after the last one; ``use_ema`` monitors ``ema_<monitor>``."""

    def __init__(self, loader: Any, every: int = 1, monitor: str = "top1", mode: str = "max", patience: Optional[int] = None, use_ema: bool = False) -> None:
        self.loader, self.every = loader, every
        self.monitor = ("ema_" if use_ema else "") + monitor
        self.tracker = BestTracker(monitor, mode, patience)
        self.pending: Optional[int] = None  # the epoch whose validation is due (saved in its checkpoint)

    def due(self, epoch: int, last: bool) -> bool:
        """Every ``every`` epochs, and always after the last epoch (``last``: or the last step)."""
        return (epoch + 1) % self.every == 0 or last

    def run(self, trainer: Any) -> Validation:
        """Validate the pending epoch: the model's metrics on the val split (and the EMA's, prefixed ``ema_``)."""
        parts, epoch = trainer.parts, self.pending
        broadcast_buffers(parts.model)  # rank 0's BatchNorm statistics, the ones its checkpoint keeps
        results = trainer.evaluate(without_ddp(parts.model), self.loader, split="val")
        if parts.ema is not None:
            ema_results = trainer.evaluate(parts.ema.module, self.loader, split="val_ema")
            results.update({f"ema_{k}": v for k, v in ema_results.items()})
        is_best = self.tracker.update(monitored_value(results, self.monitor), epoch)
        self.pending = None
        if self.tracker.should_stop:
            log.info("early stop after epoch %d: %s has not improved for %d evaluations (train.patience)", epoch, self.monitor, self.tracker.evals_since_best)
        return Validation(epoch, results, is_best, self.tracker.should_stop)

    def state_dict(self) -> Dict[str, Any]:
        return {**self.tracker.state_dict(), "pending": self.pending}

    def load_state_dict(self, state: Dict[str, Any]) -> None:
        self.tracker.load_state_dict(state)
        self.pending = state.get("pending")


class NoValidator:
    """A run without validation (test mode, a harness): never due, never pending."""

    pending: Optional[int] = None
    monitor = ""

    def __init__(self) -> None:
        self.tracker = BestTracker("")

    def due(self, epoch: int, last: bool) -> bool:
        return False

    def state_dict(self) -> Dict[str, Any]:
        return {}

    def load_state_dict(self, state: Dict[str, Any]) -> None:
        pass
