"""Where training is, in the one meaning of "epoch" the framework uses.

``Progress.epoch`` is the epoch training continues in (0-based), after ``batch`` of its batches:
the state of a checkpoint written at an epoch's end holds the *next* epoch, batch 0. A validation
record, the log's ``epoch E`` lines and the checkpoint's file name (``epoch0005_batch000019.pt``,
``utils/engine/checkpointer.py``) name the epoch that ended instead: the last epoch whose training
the weights hold, ``Progress.trained_epoch``. Nothing else converts between the two.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Progress:
    """Where training continues: epoch ``epoch`` after ``batch`` of its batches, ``step`` optimizer steps in."""

    epoch: int = 0
    batch: int = 0
    step: int = 0

    def rolled_over(self, num_batches: int) -> "Progress":
        """The same point, as the next epoch's start once all ``num_batches`` of the epoch are consumed
        (what a checkpoint at an epoch's end names); unchanged inside the epoch (the step budget ended it)."""
        return Progress(self.epoch + 1, 0, self.step) if self.batch >= num_batches else self

    @property
    def trained_epoch(self) -> int:
        """The last epoch whose training the weights hold: the epoch before ``epoch`` at an epoch's
        start (``batch`` 0), else ``epoch`` itself (a checkpoint inside it). A validation record's epoch."""
        return self.epoch - 1 if self.batch == 0 else self.epoch
