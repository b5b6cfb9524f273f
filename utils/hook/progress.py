"""Progress hook: a progress bar over each epoch's batches, with the loss and LR at log steps."""

from __future__ import annotations

from typing import Any, Optional

from utils.hook import Hook
from utils.log import progress_bar


class ProgressHook(Hook):
    """A tqdm bar on rank 0 when stderr is a terminal (log files and CI consoles get the epoch lines instead).

    Added to every training run (``train.log_every`` sets how often its loss updates).
    """

    name = "progress"  # in logs
    priority = 15

    def __init__(self, log_every: int = 10) -> None:
        self.log_every = log_every
        self.bar: Optional[Any] = None
        self._shown = 0

    def before_epoch(self, trainer: Any) -> None:
        state = trainer.state
        self.bar = progress_bar(trainer.num_batches - state.batches_done, f"epoch {state.epoch}", trainer.dist.is_main)
        self._shown = state.batches_done

    def after_step(self, trainer: Any) -> None:
        if self.bar is None:
            return
        state = trainer.state
        self.bar.update(state.batches_done - self._shown)
        self._shown = state.batches_done
        if state.step % self.log_every == 0:
            self.bar.set_postfix(
                loss=f"{trainer.read_loss():.4f}", lr=f"{trainer.parts.optimizer.param_groups[0]['lr']:.2e}"
            )

    def after_epoch(self, trainer: Any) -> None:
        self.close()

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None
