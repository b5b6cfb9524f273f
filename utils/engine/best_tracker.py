"""The best value of the monitored metric so far, and early stopping (``train.patience``)."""

from __future__ import annotations

import math
from typing import Any, Dict, List, Optional

from utils.errors import ConfigError


def monitored_value(results: Dict[str, float], monitor: str) -> float:
    """``results[monitor]``, or a ConfigError that lists what the evaluation reported."""
    if monitor not in results:
        raise ConfigError(
            f"eval.monitor: validation reported no '{monitor}'; it reported {sorted(results)} (eval.use_ema adds the ema_ prefix)"
        )
    return results[monitor]


class BestTracker:
    """Remembers the best value of the monitored metric, its epoch and the checkpoint file it was measured on
    (``file``: what ``best.pt`` links to), and counts evaluations since.

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
        self.file: Optional[str] = None  # the name of the best checkpoint file (None without checkpoints)
        self.evals_since_best = 0

    def update(self, value: float, epoch: int, file: Optional[str] = None) -> bool:
        """Record one evaluation of checkpoint ``file``; True when it is the new best. A NaN value is never the
        best (it counts as no improvement), and any number beats a NaN kept by an earlier version."""
        if math.isnan(value):
            self.evals_since_best += 1
            return False
        if self.value is None or math.isnan(self.value) or self.sign * value > self.sign * self.value:
            self.value, self.epoch, self.file, self.evals_since_best = value, epoch, file, 0
            return True
        self.evals_since_best += 1
        return False

    @property
    def should_stop(self) -> bool:
        return self.patience is not None and self.evals_since_best >= self.patience

    def state_dict(self) -> Dict[str, Any]:
        return {
            "metric": self.metric,
            "mode": self.mode,
            "value": self.value,
            "epoch": self.epoch,
            "file": self.file,
            "evals_since_best": self.evals_since_best,
        }

    def load_state_dict(self, state: Dict[str, Any]) -> None:
        self.value, self.epoch, self.file = state.get("value"), state.get("epoch"), state.get("file")
        self.evals_since_best = int(state.get("evals_since_best", 0))

    def tracks(self, state: Dict[str, Any]) -> bool:
        """Whether a saved state tracked what this tracker does (the same metric, in the same direction)."""
        return state.get("metric", self.metric) == self.metric and state.get("mode", self.mode) == self.mode

    def replay(self, rows: List[Dict[str, Any]]) -> None:
        """Start again and take the validations ``rows`` (metrics.jsonl rows, in order) one by one:
        the best of this tracker's metric among them, as if it had been monitored from the start (its ``file``
        is the caller's to find: the rows name none)."""
        self.value, self.epoch, self.file, self.evals_since_best = None, None, None, 0
        for row in rows:
            value = row.get(self.metric)
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                self.update(float(value), int(row["epoch"]))
