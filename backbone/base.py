"""The backbone protocol: a list of stages, one feature map per stage."""

from __future__ import annotations

from typing import List

import torch
from torch import nn

from utils.model.grad_checkpoint import run_checkpointed


class Backbone(nn.Module):
    """Runs ``self.stages`` in order and returns every stage's output (fine to coarse).

    Subclasses fill ``stages`` (an ``nn.ModuleList``) and ``out_channels`` (one
    entry per stage) and may override ``layer_id`` for layer-wise LR decay.
    """

    out_channels: List[int]
    strides: List[int]

    def __init__(self) -> None:
        super().__init__()
        self.stages = nn.ModuleList()
        self.grad_checkpointing = False

    def set_grad_checkpointing(self, enabled: bool = True) -> None:
        self.grad_checkpointing = enabled

    def forward(self, x: torch.Tensor) -> List[torch.Tensor]:
        features = []
        for stage in self.stages:
            x = run_checkpointed(stage, x, self.grad_checkpointing)
            features.append(x)
        return features

    @property
    def num_layers(self) -> int:
        """Layer ids run 0 (stem) .. len(stages) - 1; the head gets ``num_layers``."""
        return len(self.stages)

    def layer_id(self, name: str) -> int:
        """The stage a parameter (named relative to this backbone) belongs to."""
        parts = name.split(".")
        if parts[0] == "stages" and len(parts) > 1 and parts[1].isdigit():
            return int(parts[1])
        return 0
