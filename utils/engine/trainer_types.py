"""The types a Trainer is built from and hands out: its collaborators, its services' settings, its knobs, its position.

``Parts`` are the objects a run trains (model, optimizer, loaders, ...);
``Services`` configure the built-in behaviours ``Trainer.fit`` calls in one
fixed order (run writer, checkpointer, validator; the trainer builds the last
two with what they need of it); ``LoopOptions`` are the loop's knobs;
``RunMeta`` is what a checkpoint records about the run; ``LoopState`` is where
training is and what its last step did. Hooks read all of them through the
trainer (``utils/hook/__init__.py``).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Optional

import torch
from torch import nn

from utils.amp import Amp, StepResult
from utils.checkpoint.progress import Progress
from utils.engine.checkpointer import CheckpointSettings
from utils.engine.validator import ValidationSettings
from utils.log import RunWriter
from utils.metrics.base import Metric


@dataclass
class Parts:
    """The trainer's collaborators, built by ``main.py``.

    Training needs the optimizer, scheduler and train loader; evaluation the
    metric; test mode only model, criterion, amp and metric.
    """

    model: nn.Module  # possibly wrapped in DDP
    criterion: Callable[[Any, Any], torch.Tensor]
    amp: Amp
    optimizer: Optional[torch.optim.Optimizer] = None
    scheduler: Optional[Any] = None
    train_loader: Optional[Any] = None  # a loader, or any sized iterable of (inputs, targets)
    metric: Optional[Metric] = None
    ema: Optional[Any] = None  # a ModelEma: updated after every step taken, validated beside the weights


@dataclass
class Services:
    """The built-in behaviours, called by ``Trainer.fit`` in the order it shows; None where a run has none
    (test mode, a harness: no checkpoints, no validation)."""

    writer: RunWriter = field(default_factory=RunWriter.disabled)
    checkpoints: Optional[CheckpointSettings] = None
    validation: Optional[ValidationSettings] = None
    samples: Optional[Path] = None  # where rank 0 records each step's samples (train.record_samples); None: nowhere


@dataclass
class LoopOptions:
    """The loop's settings, as plain values (``main.py`` fills them from the config)."""

    epochs: int = 1
    step_limit: Optional[int] = None  # a step budget (train.iterations)
    accumulate: int = 1
    clip_grad_norm: Optional[float] = None
    clip_grad_value: Optional[float] = None
    nonfinite: str = "stop"
    max_nonfinite_skips: int = 10
    log_every: int = 10  # steps between reads of the loss (train.log_every)
    sync_every: Optional[int] = None  # steps between agreements of the ranks (train.sync_every; None: log_every)


@dataclass
class RunMeta:
    """What checkpoints record about the run, and what hooks may show of it."""

    config: Dict[str, Any] = field(default_factory=dict)  # the resolved config
    classes: Optional[List[Any]] = None  # the training data's class list
    num_classes: Optional[int] = None  # the training data's number of classes: the first batch's outputs must cover it
    data: Optional[Dict[str, Any]] = (
        None  # the training split's identity (utils/data/identity.py): a resume on other data is refused
    )
    trial: Optional[Any] = None  # a sweep's trial this run belongs to (utils.sweep.pruning.TrialRef), for trackers


@dataclass
class LoopState:
    """Where training is, and what its last step did. ``epoch`` means what ``Progress.epoch`` does
    (``utils/checkpoint/progress.py``), except while a validation runs: then the epoch it validates."""

    epoch: int = 0  # the current epoch (0-based)
    batches_done: int = 0  # batches of the current epoch consumed so far
    step: int = 0  # optimizer steps so far, skipped ones (overflow, non-finite loss) included
    # whether the last step changed the weights (ON_DEVICE: step_skipped says)
    step_result: StepResult = StepResult.TAKEN
    step_skipped: Optional[torch.Tensor] = (
        None  # with ON_DEVICE: 0-dim flag on the device, 1.0 where the update was skipped
    )
    loss: Optional[torch.Tensor] = None  # the last micro-batch's loss, on the device (trainer.read_loss() for logs)
    train_metrics: Dict[str, float] = field(default_factory=dict)  # the last epoch's (after_epoch)
    stop: bool = False  # end training after this epoch (early stopping, or a hook's request)

    @property
    def batch(self) -> int:
        """``batches_done``, by the name hooks have read it with."""
        return self.batches_done

    @property
    def progress(self) -> Progress:
        """The point training is at, as a checkpoint names it."""
        return Progress(self.epoch, self.batches_done, self.step)

    def move_to(self, progress: Progress) -> None:
        """Continue from ``progress`` (a resume, or the next epoch)."""
        self.epoch, self.batches_done, self.step = progress.epoch, progress.batch, progress.step

    @contextlib.contextmanager
    def showing_epoch(self, epoch: int) -> Iterator[None]:
        """``epoch`` as the current epoch inside: a validation shows the hooks the epoch it validates
        (a resumed run's pending one is of the epoch before the one it continues in)."""
        current, self.epoch = self.epoch, epoch
        try:
            yield
        finally:
            self.epoch = current


@dataclass
class TrainResult:
    """What ``Trainer.fit`` hands back: the checkpoint to test and why."""

    best_path: Optional[Path]  # the best checkpoint (None without checkpoints)
    monitor: str
    best_value: Optional[float]
    best_epoch: Optional[int]
