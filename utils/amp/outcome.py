"""What an optimizer step under amp did, as far as the host knows without reading a tensor."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Optional

import torch


class StepResult(enum.Enum):
    """Whether a step changed the weights: decided on the host, or left to the device."""

    TAKEN = "taken"
    SKIPPED = "skipped"  # overflow, or a non-finite gradient under train.nonfinite=skip
    ON_DEVICE = "on_device"  # a fused optimizer was given found_inf: read it at a sync point


@dataclass
class StepOutcome:
    """A step's result; with ``ON_DEVICE``, ``found_inf`` (0-dim, 1.0: skipped) tells, to be read later."""

    result: StepResult
    found_inf: Optional[torch.Tensor] = None

    @classmethod
    def decided(cls, taken: bool, found_inf: Optional[torch.Tensor] = None) -> "StepOutcome":
        return cls(StepResult.TAKEN if taken else StepResult.SKIPPED, found_inf)


@dataclass(frozen=True)
class ClipOptions:
    """Gradient clipping before a step (``train.clip_grad_norm`` / ``train.clip_grad_value``)."""

    norm: Optional[float] = None
    value: Optional[float] = None
