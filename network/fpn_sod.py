"""A plain FPN baseline for saliency: lateral 1x1 convs, top-down upsample-and-add, 3x3 smoothing."""

from __future__ import annotations

from typing import Any, Dict, List, Optional

import torch
from torch import nn

from module.conv import ConvBNAct
from module.interaction import resize_to
from network.saliency import SaliencyNetwork
from utils.config.arguments import Count
from utils.registry import NETWORKS


@NETWORKS.register("fpn_sod")
class FPNSaliency(SaliencyNetwork):
    """The baseline MINet's modules are measured against: the same backbone and head, a
    decoder without AIM or SIM."""

    def __init__(
        self,
        backbone: str = "resnet50",
        backbone_args: Optional[Dict[str, Any]] = None,
        in_channels: Count = 3,
        channels: Count = 64,
        head_channels: Count = 32,
    ) -> None:
        super().__init__(backbone, backbone_args, in_channels, channels, head_channels)
        self.lateral = nn.ModuleList(ConvBNAct(c, channels, kernel_size=1) for c in self.backbone.out_channels)
        self.smooth = nn.ModuleList(ConvBNAct(channels, channels) for _ in self.backbone.out_channels)

    def decode(self, features: List[torch.Tensor]) -> torch.Tensor:
        y = None
        for i in reversed(range(len(features))):
            lateral = self.lateral[i](features[i])
            y = lateral if y is None else resize_to(y, lateral.shape[-2:]) + lateral
            y = self.checkpointed(self.smooth[i], y)
        return y
