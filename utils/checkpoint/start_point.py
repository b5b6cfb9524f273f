"""Where a training run starts: the one call that turns the run's folder and the request into a ``StartPoint``.

``--resume``, ``--resume RUN``, ``--resume FILE``, ``train.auto_resume`` and a sweep's continued trial choose a
run folder and, under its lock, the checkpoint it continues from (``resume_point.py``, on rank 0, hashing and
loading that file once: ``open_run``); ``start_point`` then guards it against this run's config (``guard.py``)
and reads everything a resume needs from it and from its validation record, once:

- ``progress``: where training continues (the interrupted epoch's first batch when the data order changed);
- ``validator``: the validator's state to continue with (the record's, after the validation that followed the
  checkpoint, else the checkpoint's own, when that validation did not finish: ``records.validator_as_of``);
- ``best``: what that state says of the best: the monitored metric, its best value and epoch, and the best
  checkpoint file at that point.

The Trainer applies it in one place (``Trainer.start_from``): the training state into its objects, the
position, the validator's state (and with it the checkpointer's best file), the run writer's and the sample
recorder's step.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Dict, NamedTuple, Optional

from utils.checkpoint.progress import Progress
from utils.checkpoint.records import ValidationRecord, validator_as_of
from utils.checkpoint.sharded_layout import looks_sharded
from utils.checkpoint.snapshot import StateObjects
from utils.checkpoint.state import Checkpoint

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Best:
    """The best validation so far: the monitored metric, its value and epoch, and the checkpoint file it made best
    (None each before the first validation)."""

    metric: Optional[str] = None
    value: Optional[float] = None
    epoch: Optional[int] = None
    file: Optional[str] = None


@dataclass(frozen=True)
class StartPoint:
    """A resumed run's start: the checkpoint (loaded and verified once) at ``path``, the record of the validation
    after it (None when that validation did not finish, or there was none), where training continues, the
    validator's state to continue with (and with it the best so far); ``reset_optimizer``: its optimizer state is left out."""

    path: Path
    checkpoint: Checkpoint
    record: Optional[ValidationRecord]
    progress: Progress
    validator: Dict[str, Any]
    reset_optimizer: bool = False

    def load_state(self, objects: StateObjects, rank: int, world_size: int) -> None:
        """Everything but the weights (loaded before amp and DDP) into ``objects``, and rank ``rank``'s random state
        (``Checkpoint.restore``); the line scripts read says where training continues."""
        progress = self.progress
        self.checkpoint.restore(objects, rank, world_size, self.reset_optimizer)
        if self.checkpoint.progress.batch != progress.batch:
            log.warning(
                "the checkpoint's data order does not hold (above): epoch %d restarts from its first batch",
                progress.epoch,
            )
        log.info("training state restored: epoch %d, step %d", progress.epoch, progress.step)

    @property
    def best(self) -> Best:
        """What the validator's state says of the best (the state is the one place it is kept)."""
        state = self.validator
        return Best(state.get("metric"), state.get("value"), state.get("epoch"), state.get("file"))

    @property
    def step(self) -> int:
        """The optimizer steps the checkpoint holds: what the run's records (metrics.jsonl, TensorBoard,
        samples.jsonl) are rewound to."""
        return self.progress.step


class Chosen(NamedTuple):
    """The checkpoint rank 0 chose for the run to continue from (``resume_point.checkpoint_to_resume``), with its
    validation record; ``loaded``: that checkpoint as rank 0 read it while choosing (None on the other ranks)."""

    path: Path
    record: Optional[ValidationRecord] = None
    loaded: Optional[Checkpoint] = None


def start_point(
    chosen: Optional[Chosen], guard: Callable[[Checkpoint], bool], reset_optimizer: bool = False
) -> Optional[StartPoint]:
    """The start of a run that continues from the ``chosen`` checkpoint (None: a fresh start, None), read once on
    each rank. ``guard(checkpoint)`` refuses a changed model, data or optimizer type (CheckpointError) and says
    whether the checkpoint's data order still holds."""
    if chosen is None:
        return None
    path, record = chosen.path, chosen.record
    if chosen.loaded is not None:  # rank 0 read it while choosing it
        checkpoint = chosen.loaded
    elif looks_sharded(
        Path(path)
    ):  # rank 0 checked every shard against SHA256SUMS as it chose it: not again on each rank
        checkpoint = Checkpoint.checked(path)
    else:  # a file: this rank reads it, checked as it is read
        checkpoint = Checkpoint.load(path)
    same_data = guard(checkpoint)
    saved = checkpoint.progress
    progress = saved if same_data else Progress(saved.epoch, 0, saved.step)
    validator = validator_as_of(path, record, checkpoint.loop_state)
    return StartPoint(Path(path), checkpoint, record, progress, validator, reset_optimizer)
