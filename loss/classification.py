"""Classification criteria."""

from __future__ import annotations

from typing import Annotated, Any, Optional

import torch
import torch.nn.functional as F
from torch import nn

from utils.config.arguments import above, in_range
from utils.metrics.base import target_labels, target_tensor
from utils.registry import LOSSES


@LOSSES.register("cross_entropy")
class CrossEntropy(nn.Module):
    """Cross entropy with optional label smoothing; targets are labels (or ``{label: ...}``)."""

    def __init__(self, label_smoothing: Annotated[float, in_range(0, 1)] = 0.0) -> None:
        super().__init__()
        self.label_smoothing = label_smoothing

    def forward(self, outputs: torch.Tensor, targets: Any) -> torch.Tensor:
        return F.cross_entropy(outputs.float(), target_labels(targets), label_smoothing=self.label_smoothing)


@LOSSES.register("bce_with_logits")
class BCEWithLogits(nn.Module):
    """Binary cross entropy on logits.

    Targets: float maps of the outputs' shape (dense prediction, also as ``{mask: ...}``),
    or integer class labels (also as ``{label: ...}``), which become one-hot.
    """

    def __init__(self, pos_weight: Optional[Annotated[float, above(0)]] = None) -> None:
        super().__init__()
        self.pos_weight = pos_weight

    def forward(self, outputs: torch.Tensor, targets: Any) -> torch.Tensor:
        targets = target_tensor(targets, "mask", "label")
        if targets.dtype in (torch.int64, torch.int32) and targets.dim() == outputs.dim() - 1:
            targets = F.one_hot(targets, outputs.shape[1])
        pos_weight = None if self.pos_weight is None else torch.tensor(self.pos_weight, device=outputs.device)
        return F.binary_cross_entropy_with_logits(outputs.float(), targets.float(), pos_weight=pos_weight)
