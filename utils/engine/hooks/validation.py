"""Validation hook: evaluate (and the EMA), track the best epoch, stop early without improvement."""

from __future__ import annotations

import logging
from typing import Any, Dict, Optional

from utils.distributed.parallel import without_ddp
from utils.distributed.replicas import broadcast_buffers
from utils.errors import ConfigError
from utils.hook import Hook
from utils.registry import HOOKS

log = logging.getLogger(__name__)


def should_validate(epoch: int, every: int, epochs: int, finished: bool) -> bool:
    """Every ``every`` epochs, and always after the last epoch (or the last step)."""
    return (epoch + 1) % every == 0 or epoch + 1 == epochs or finished


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
        """Record one evaluation; True when it is the new best."""
        if self.value is None or self.sign * value > self.sign * self.value:
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


@HOOKS.register("validation")
class ValidationHook(Hook):
    """After every ``every`` epochs (and the last): evaluate, call ``after_validation``, update the
    best epoch (``state.is_best``: the checkpoint hook then writes best.pt), and set
    ``state.stop`` after ``patience`` evaluations without improvement.

    With ``use_ema`` the EMA's metrics (``ema_<monitor>``) are monitored.
    """

    name = "validation"  # in logs and checkpoints
    priority = 60

    def __init__(self, every: int = 1, monitor: str = "top1", mode: str = "max", patience: Optional[int] = None, use_ema: bool = False) -> None:
        self.every = every
        self.monitor = ("ema_" if use_ema else "") + monitor
        self.tracker = BestTracker(monitor, mode, patience)

    def before_train(self, trainer: Any) -> None:
        if self.tracker.should_stop:  # a resumed run that had already stopped early trains no further
            trainer.state.stop = True

    def after_epoch(self, trainer: Any) -> None:
        state = trainer.state
        state.is_best = False
        if not should_validate(state.epoch, self.every, trainer.options.epochs, trainer.out_of_steps):
            return
        results = self.validate(trainer)
        state.is_best = self.tracker.update(monitored_value(results, self.monitor), state.epoch)
        if self.tracker.should_stop:
            log.info("early stop after epoch %d: %s has not improved for %d evaluations (train.patience)", state.epoch, self.monitor, self.tracker.evals_since_best)
            state.stop = True

    def validate(self, trainer: Any) -> Dict[str, float]:
        """The model's metrics on the validation split (and the EMA's, prefixed ``ema_``)."""
        parts = trainer.parts
        broadcast_buffers(parts.model)  # rank 0's BatchNorm statistics, the ones its checkpoint keeps
        results = trainer.evaluate(without_ddp(parts.model), parts.val_loader, split="val")
        if parts.ema is not None:
            ema_results = trainer.evaluate(parts.ema.module, parts.val_loader, split="val_ema")
            results.update({f"ema_{k}": v for k, v in ema_results.items()})
        trainer.hooks.call("after_validation", trainer, results)
        return results

    def state_dict(self) -> Dict[str, Any]:
        return self.tracker.state_dict()

    def load_state_dict(self, state: Dict[str, Any]) -> None:
        self.tracker.load_state_dict(state)
