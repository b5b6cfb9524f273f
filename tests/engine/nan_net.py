"""A classifier that produces NaN outputs, or NaN weights, at chosen training calls.

Tests load it into ``main.py`` with ``custom_imports=[tests.engine.nan_net]`` to drive the
``train.nonfinite`` policy.
"""

from __future__ import annotations

from typing import Optional, Sequence

import torch

from network.classifier import Classifier
from utils.distributed.ops import get_rank
from utils.registry import NETWORKS


@NETWORKS.register("nan_classifier")
class NanClassifier(Classifier):
    """NaN logits at training calls ``nan_at`` (1-based) on rank ``nan_rank`` (None: all ranks);
    ``poison_at`` writes NaN into the head's bias at that call (the weights stay NaN)."""

    def __init__(self, num_classes: int = 10, nan_at: Sequence[int] = (), nan_rank: Optional[int] = None, poison_at: int = 0, **kwargs) -> None:
        super().__init__(num_classes, **kwargs)
        self.nan_at, self.nan_rank, self.poison_at, self.calls = set(nan_at), nan_rank, poison_at, 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = super().forward(x)
        if not self.training:
            return out
        self.calls += 1
        if self.calls == self.poison_at:
            with torch.no_grad():
                self.head[-1].bias.fill_(float("nan"))
        if self.calls in self.nan_at and self.nan_rank in (None, get_rank()):
            out = out * float("nan")
        return out
