"""Image classifier: backbone -> global average pooling -> linear head."""

from __future__ import annotations

from typing import Annotated, Any, Dict, Optional

import torch
from torch import nn

from utils.config.arguments import Count, in_range
from utils.registry import BACKBONES, NETWORKS

DropRate = Annotated[float, in_range(0, 1, high_open=True)]  # the probability of zeroing a feature


@NETWORKS.register("classifier")
class Classifier(nn.Module):
    """Classifies from the backbone's last (coarsest) feature map."""

    def __init__(
        self,
        num_classes: Count,
        backbone: str = "small_cnn",
        backbone_args: Optional[Dict[str, Any]] = None,
        dropout: DropRate = 0.0,
    ) -> None:
        super().__init__()
        self.backbone = BACKBONES.build(backbone, **(backbone_args or {}))
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.head = nn.Sequential(
            nn.Flatten(), nn.Dropout(dropout), nn.Linear(self.backbone.out_channels[-1], num_classes)
        )

    def set_grad_checkpointing(self, enabled: bool = True) -> None:
        self.backbone.set_grad_checkpointing(enabled)

    def layer_id(self, name: str) -> int:
        """Layer index for layer-wise LR decay: the backbone's ids first, then the head (``num_layers``)."""
        if name.startswith("backbone."):
            return self.backbone.layer_id(name[len("backbone.") :])
        return self.backbone.num_layers

    @property
    def num_layers(self) -> int:
        """The head's layer id: ids run 0 .. num_layers and the head keeps the full LR."""
        return self.backbone.num_layers

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.pool(self.backbone(x)[-1]))
