"""What a NaN/inf loss does: stop the run, or skip the step up to a limit (``train.nonfinite``)."""

from __future__ import annotations

import logging
from typing import Dict

import torch

from utils.distributed.ops import any_rank
from utils.errors import ConfigError, NonFiniteError

log = logging.getLogger(__name__)


class NonFinitePolicy:
    """``train.nonfinite``: ``stop`` at the first NaN/inf loss, or ``skip`` the step, up to
    ``max_skips`` consecutive ones. The count survives epochs and resumes (``state_dict``)."""

    def __init__(self, mode: str = "stop", max_skips: int = 10) -> None:
        if mode not in ("stop", "skip"):
            raise ConfigError(f"train.nonfinite must be 'stop' or 'skip', got '{mode}'")
        self.mode, self.max_skips, self.consecutive, self.total = mode, int(max_skips), 0, 0

    def is_bad(self, loss: torch.Tensor) -> bool:
        """Whether to skip this micro-batch; under ``skip`` all ranks agree, so none desyncs."""
        bad = not bool(torch.isfinite(loss.detach()).all())
        return any_rank(bad) if self.mode == "skip" else bad

    def on_bad(self, loss: torch.Tensor, epoch: int, step: int) -> None:
        hint = "lower optim.lr, enable train.clip_grad_norm, or use amp.opt_level=O0; the last good checkpoint is kept"
        if self.mode == "stop":
            raise NonFiniteError(f"loss is {loss.item()} at epoch {epoch}, step {step} (train.nonfinite=stop); {hint}")
        self.consecutive += 1
        self.total += 1
        if self.consecutive > self.max_skips:
            raise NonFiniteError(f"non-finite loss in {self.consecutive} consecutive steps at epoch {epoch}, step {step} (train.max_nonfinite_skips={self.max_skips}); {hint}")
        log.warning("loss is %s at epoch %d, step %d: step skipped (%d in a row, train.max_nonfinite_skips=%d)", loss.item(), epoch, step, self.consecutive, self.max_skips)

    def on_good(self) -> None:
        self.consecutive = 0

    def state_dict(self) -> Dict[str, int]:
        return {"consecutive": self.consecutive, "total": self.total}

    def load_state_dict(self, state: Dict[str, int]) -> None:
        self.consecutive, self.total = int(state.get("consecutive", 0)), int(state.get("total", 0))
