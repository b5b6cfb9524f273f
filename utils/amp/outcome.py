"""What an optimizer step under amp did, as far as the host knows without reading a tensor."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import torch


@dataclass
class StepOutcome:
    """``taken``: True/False where the host decided; None where the device did (a fused optimizer
    given ``found_inf``), and ``found_inf`` (0-dim, 1.0: skipped) tells, to be read at a sync point."""

    taken: Optional[bool]
    found_inf: Optional[torch.Tensor] = None

    @property
    def may_skip(self) -> bool:
        return self.taken is not True


@dataclass(frozen=True)
class ClipOptions:
    """Gradient clipping before a step (``train.clip_grad_norm`` / ``train.clip_grad_value``)."""

    norm: Optional[float] = None
    value: Optional[float] = None
