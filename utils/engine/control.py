"""Training control: how long to train, when to validate, which epoch is best, when to stop early."""

from __future__ import annotations

import logging
import math
from typing import Any, Dict, Optional, Tuple

from utils.config import TrainConfig
from utils.errors import ConfigError

log = logging.getLogger(__name__)


def steps_per_epoch(num_batches: int, accumulate: int) -> int:
    """Optimizer steps in one epoch: a trailing partial group of micro-batches is a step too."""
    return max(math.ceil(num_batches / accumulate), 1)


def training_length(cfg: TrainConfig, epoch_steps: int) -> Tuple[int, int]:
    """``(epochs, total optimizer steps)``; ``train.iterations`` overrides ``train.epochs``.

    With iterations N the run lasts ceil(N / steps per epoch) epochs and the
    last one stops after step N.
    """
    if cfg.iterations is None:
        epochs, total = cfg.epochs, cfg.epochs * epoch_steps
        log.info("training length: %d epochs of %d optimizer steps (%d steps)", epochs, epoch_steps, total)
    else:
        total = cfg.iterations
        epochs = math.ceil(total / epoch_steps)
        log.info("training length: train.iterations=%d optimizer steps (%d epochs of %d steps; overrides train.epochs)", total, epochs, epoch_steps)
    return epochs, total


def should_validate(epoch: int, every: int, epochs: int, finished: bool) -> bool:
    """Every ``every`` epochs, and always after the last epoch (or the last step)."""
    return (epoch + 1) % every == 0 or epoch + 1 == epochs or finished


def monitored_value(results: Dict[str, float], monitor: str) -> float:
    """``results[monitor]``, or a ValueError that lists what the evaluation reported."""
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
