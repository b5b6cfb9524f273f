"""How long to train: epochs or ``train.iterations``, and the optimizer steps of an epoch."""

from __future__ import annotations

import logging
import math
from typing import Optional, Tuple

from utils.checkpoint.state import Progress
from utils.config.schema import TrainConfig
from utils.errors import DataError

log = logging.getLogger(__name__)


def steps_per_epoch(num_batches: int, accumulate: int) -> int:
    """Optimizer steps in one epoch: a trailing partial group of micro-batches is a step too."""
    return max(math.ceil(num_batches / accumulate), 1)


def check_takes_steps(num_batches: int, samples: int, batch_size: int, drop_last: bool, batchnorm: bool) -> None:
    """DataError before training when an epoch of ``num_batches`` would take no optimizer step (the
    run would end at once, "trained"): ``samples`` per process, the per-process ``batch_size``."""
    if num_batches > 0:
        return
    if samples == 0:
        why, fix = "there is no batch to read", "add training samples"
    elif batchnorm and samples % batch_size == 1:  # the loader drops a last batch of one sample (utils/data/loader.py)
        why, fix = (
            (
                "its only batch would hold 1 sample, which the network's BatchNorm cannot normalize in training, so it is dropped "
                "whatever data.drop_last says"
            ),
            "add training samples (at least 2 per process)",
        )
    else:
        why, fix = (
            f"data.drop_last={str(drop_last).lower()} drops the incomplete batch",
            "add training samples, lower data.batch_size or set data.drop_last=false",
        )
    raise DataError(
        f"training would take no step: the training split has {samples} sample(s) per process and data.batch_size is {batch_size}; {why}; {fix}"
    )


def training_length(cfg: TrainConfig, epoch_steps: int, start: Optional[Progress] = None) -> Tuple[int, int]:
    """``(epochs, total optimizer steps)``; ``train.iterations`` overrides ``train.epochs``.

    With iterations N the run lasts ceil(N / steps per epoch) epochs and the
    last one stops after step N. A resumed epoch-based run (``start``) counts the steps it took
    and those left at this run's steps per epoch: with another ``train.accumulate`` an epoch has
    another step count, and the schedule must still end with the last epoch, not before it.
    """
    if cfg.iterations is not None:
        total = cfg.iterations
        epochs = math.ceil(total / epoch_steps)
        log.info(
            "training length: train.iterations=%d optimizer steps (%d epochs of %d steps; overrides train.epochs)",
            total,
            epochs,
            epoch_steps,
        )
        return epochs, total
    epochs, total = cfg.epochs, cfg.epochs * epoch_steps
    if start is not None:
        # accumulation groups align to multiples of K within an epoch
        done_in_epoch = math.ceil(start.batch / cfg.accumulate)
        resumed_total = start.step + max(epochs - start.epoch, 0) * epoch_steps - done_in_epoch
        if resumed_total != total:
            log.info(
                "training length: %d steps taken, %d left at %d optimizer steps per epoch: the schedule spans %d steps (not %d x %d)",
                start.step,
                resumed_total - start.step,
                epoch_steps,
                resumed_total,
                epochs,
                epoch_steps,
            )
        total = max(resumed_total, start.step)
    log.info("training length: %d epochs of %d optimizer steps (%d steps)", epochs, epoch_steps, total)
    return epochs, total
