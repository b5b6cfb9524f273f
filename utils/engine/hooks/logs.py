"""Logging hook: the run's log lines, metrics.jsonl rows and TensorBoard scalars (rank 0 writes)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Dict, Optional

from utils.hook import Hook
from utils.log import RunWriter, format_metrics
from utils.registry import HOOKS

log = logging.getLogger(__name__)


@HOOKS.register("logging")
class LoggingHook(Hook):
    """``train/loss`` (the mean since the previous log step) and ``train/lr`` every ``log_every`` steps, ``train_epoch/*`` after each
    epoch, ``val/*`` and ``test/*`` with a metrics.jsonl row per evaluation.

    Runs first (priority 10), so an epoch's training line precedes its validation.
    """

    name = "logging"  # in logs and checkpoints
    priority = 10

    def __init__(self, output_dir: str, log_every: int = 10) -> None:
        self.output_dir = Path(output_dir)
        self.log_every = log_every
        self._writer: Optional[RunWriter] = None

    def writer(self, trainer: Any) -> RunWriter:
        """The run's writer, opened on first use (a no-op off rank 0)."""
        if self._writer is None:
            self._writer = RunWriter(self.output_dir, trainer.options.is_main)
        return self._writer

    def after_step(self, trainer: Any) -> None:
        state = trainer.state
        if state.step % self.log_every == 0:
            lr = trainer.parts.optimizer.param_groups[0]["lr"]
            self.writer(trainer).scalars("train", {"loss": trainer.read_loss(), "lr": lr}, state.step)

    def after_epoch(self, trainer: Any) -> None:
        epoch, metrics = trainer.state.epoch, trainer.state.train_metrics
        log.info("epoch %d train: %s", epoch, format_metrics(metrics))
        self.writer(trainer).scalars("train_epoch", metrics, epoch)

    def after_validation(self, trainer: Any, metrics: Dict[str, float]) -> None:
        self._evaluation(trainer, "val", metrics)

    def after_test(self, trainer: Any, metrics: Dict[str, float]) -> None:
        self._evaluation(trainer, "test", metrics)
        self.writer(trainer).flush()

    def _evaluation(self, trainer: Any, split: str, metrics: Dict[str, float]) -> None:
        epoch = trainer.state.epoch
        if split == "val":
            log.info("epoch %d val: %s", epoch, format_metrics(metrics))
        writer = self.writer(trainer)
        writer.scalars(split, metrics, epoch)
        writer.metrics({"split": split, "epoch": epoch, **metrics})

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
