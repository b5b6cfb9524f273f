"""The validator: evaluate the model (and its EMA) on the val split, track the best epoch, stop early.

It owns what is pending: at an epoch's end the trainer tells it the epoch was
trained (``epoch_trained``), and when that epoch is due its validation is
``pending``. The trainer writes the epoch's checkpoint first (``Trainer.fit``),
so a failure here never loses the epoch's training: ``pending`` is saved in
that checkpoint, and a resume runs a validation that did not finish
(``run_pending``) before it continues.

It evaluates through ``Scoring``: the trainer's ``evaluate``, which also shows
every batch to the hooks; so the trainer builds it from ``ValidationSettings``.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional

from torch import nn

from utils.checkpoint.records import ValidationRecord
from utils.distributed.parallel import without_ddp
from utils.distributed.replicas import broadcast_buffers
from utils.engine.best_tracker import BestTracker, monitored_value

__all__ = ["BestTracker", "NoValidator", "Scoring", "ValidationSettings", "Validator"]

log = logging.getLogger(__name__)

Evaluate = Callable[[nn.Module, Any, str], Dict[str, float]]  # (model, loader, split) -> metrics reduced over all ranks


@dataclass
class Scoring:
    """What a validation evaluates and how: ``evaluate`` (the trainer's; the hooks see each batch),
    the model (possibly wrapped in DDP) and the EMA's module (None without ``train.ema``)."""

    evaluate: Evaluate
    model: nn.Module
    ema: Optional[nn.Module] = None


class Validator:
    """Validates every ``every`` epochs and after the last one; ``use_ema`` monitors ``ema_<monitor>``.

    Without ``scoring`` it only tracks (a resume's records replayed, a test): ``run_pending`` needs it."""

    def __init__(
        self,
        loader: Any,
        every: int = 1,
        monitor: str = "top1",
        mode: str = "max",
        patience: Optional[int] = None,
        use_ema: bool = False,
        scoring: Optional[Scoring] = None,
        judge: Optional[Callable[[int, Dict[str, float], str], bool]] = None,
    ) -> None:
        """``judge(epoch, metrics, monitor)``: an outside stop after a validation (a sweep's pruner), the same on every rank."""
        self.loader, self.every, self.scoring, self.judge = loader, every, scoring, judge
        self.judged_stop = False
        self.monitor = ("ema_" if use_ema else "") + monitor
        self.tracker = BestTracker(self.monitor, mode, patience)
        self.pending: Optional[int] = None  # the epoch whose validation is due (saved in its checkpoint)
        self.retracked: Optional[str] = (
            None  # a resume whose saved tracker followed another metric or direction: "metric (mode)"
        )

    def due(self, epoch: int, last: bool) -> bool:
        """Every ``every`` epochs, and always after the last epoch (``last``: or the last step)."""
        return (epoch + 1) % self.every == 0 or last

    def epoch_trained(self, epoch: int, last: bool) -> None:
        """Epoch ``epoch``'s training ended (``last``: the run's last): its validation is pending when due."""
        if self.due(epoch, last):
            self.pending = epoch

    def run_pending(self, step: int, checkpoint: Optional[Path] = None) -> ValidationRecord:
        """Validate the pending epoch at ``step``: the model's metrics on the val split (and the EMA's, prefixed
        ``ema_``), with the validator's state after it (what its checkpoint's record keeps); ``checkpoint``: the
        file that holds these weights (None without checkpoints), the best file when they are the best."""
        scoring, epoch = self.scoring, self.pending
        if scoring is None or epoch is None:
            raise RuntimeError("Validator.run_pending: nothing pending, or built without scoring")  # a caller's bug
        broadcast_buffers(scoring.model)  # rank 0's BatchNorm statistics, the ones its checkpoint keeps
        results = scoring.evaluate(without_ddp(scoring.model), self.loader, "val")
        if scoring.ema is not None:
            ema_results = scoring.evaluate(scoring.ema, self.loader, "val_ema")
            results.update({f"ema_{k}": v for k, v in ema_results.items()})
        file = checkpoint.name if checkpoint is not None else None
        self.tracker.update(monitored_value(results, self.monitor), epoch, file)
        self.pending = None
        if self.judge is not None:
            self.judged_stop = self.judge(epoch, results, self.monitor)
        if self.tracker.should_stop:
            log.info(
                "early stop after epoch %d: %s has not improved for %d evaluations (train.patience)",
                epoch,
                self.monitor,
                self.tracker.evals_since_best,
            )
        return ValidationRecord(epoch, step, results, self.state_dict())

    @property
    def should_stop(self) -> bool:
        """Early stopping (``train.patience``) or the judge's stop."""
        return self.tracker.should_stop or self.judged_stop

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
        log.info(
            "eval.monitor changed on resume (%s -> %s (%s)): best rebuilt from %d recorded validation(s): %s at epoch %s",
            self.retracked,
            self.monitor,
            self.tracker.mode,
            len(rows),
            self.tracker.value,
            self.tracker.epoch,
        )


@dataclass
class ValidationSettings:
    """The validator as ``main.py`` configures it (``eval.*``, ``train.patience``); the trainer builds it
    with its ``Scoring`` (``build``)."""

    loader: Any
    every: int = 1
    monitor: str = "top1"
    mode: str = "max"
    patience: Optional[int] = None
    use_ema: bool = False
    judge: Optional[Callable[[int, Dict[str, float], str], bool]] = None

    def build(self, scoring: Scoring) -> Validator:
        return Validator(
            self.loader, self.every, self.monitor, self.mode, self.patience, self.use_ema, scoring, self.judge
        )


class NoValidator:
    """A run without validation (test mode, a harness): never due, never pending."""

    pending: Optional[int] = None
    retracked: Optional[str] = None
    monitor = ""

    def __init__(self) -> None:
        self.tracker = BestTracker("")

    @property
    def should_stop(self) -> bool:
        return self.tracker.should_stop

    def epoch_trained(self, epoch: int, last: bool) -> None:
        pass

    def load_state_dict(self, state: Dict[str, Any]) -> None:
        pass

    def state_dict(self) -> Dict[str, Any]:
        return {}
