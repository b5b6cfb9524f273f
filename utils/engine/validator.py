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
from typing import Any, Dict, List, Optional

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
        self.mode = mode
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
        return {"metric": self.metric, "mode": self.mode, "value": self.value, "epoch": self.epoch, "evals_since_best": self.evals_since_best}

    def load_state_dict(self, state: Dict[str, Any]) -> None:
        self.value, self.epoch = state["value"], state["epoch"]
        self.evals_since_best = int(state.get("evals_since_best", 0))

    def tracks(self, state: Dict[str, Any]) -> bool:
        """Whether a saved state tracked what this tracker does (the same metric, in the same direction)."""
        return state.get("metric", self.metric) == self.metric and state.get("mode", self.mode) == self.mode

    def replay(self, rows: List[Dict[str, Any]]) -> None:
        """Start again and take the validations ``rows`` (metrics.jsonl rows, in order) one by one:
        the best of this tracker's metric among them, as if it had been monitored from the start."""
        self.value, self.epoch, self.evals_since_best = None, None, 0
        for row in rows:
            value = row.get(self.metric)
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                self.update(float(value), int(row["epoch"]))


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
        self.tracker = BestTracker(self.monitor, mode, patience)
        self.pending: Optional[int] = None  # the epoch whose validation is due (saved in its checkpoint)
        self.retracked: Optional[str] = None  # a resume whose saved tracker followed another metric or direction: "metric (mode)"

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
        """The saved tracker and pending epoch; a tracker of another metric or direction (a changed eval.monitor,
        eval.monitor_mode or eval.use_ema) is not taken: ``retracked`` names it, and ``retrack`` rebuilds this one."""
        self.pending = state.get("pending")
        if self.tracker.tracks(state):
            self.tracker.load_state_dict(state)
            self.retracked = None
        else:
            self.retracked = f"{state.get('metric')} ({state.get('mode', '?')})"

    def retrack(self, rows: List[Dict[str, Any]]) -> None:
        """After a resume with another monitor: the best and the patience count from the recorded validations ``rows``."""
        self.tracker.replay(rows)
        log.info("eval.monitor changed on resume (%s -> %s (%s)): best rebuilt from %d recorded validation(s): %s at epoch %s",
                 self.retracked, self.monitor, self.tracker.mode, len(rows), self.tracker.value, self.tracker.epoch)


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
