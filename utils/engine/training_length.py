"""How long to train: epochs or ``train.iterations``, and the optimizer steps of an epoch."""

from __future__ import annotations

import logging
import math
from typing import Tuple

from utils.config import TrainConfig

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
