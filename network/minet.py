"""MINet (Pang et al., CVPR 2020): AIM on the encoder pyramid, a top-down decoder with SIMs."""

from __future__ import annotations

from typing import Any, Dict, List, Optional

import torch
from torch import nn

from module.conv import ConvBNAct
from module.interaction import AggregateInteraction, SelfInteraction, resize_to
from network.saliency import SaliencyNetwork
from utils.config.arguments import Count
from utils.model.grad_checkpoint import checkpointed_call, checkpointing
from utils.registry import NETWORKS


@NETWORKS.register("minet")
class MINet(SaliencyNetwork):
    """Encoder levels -> AIM (each level with its neighbours) -> coarse-to-fine decoder where
    each step adds the upsampled coarser map, refines it with a SIM (residual) and a conv.

    The paper's setup: ``backbone=resnet50`` (or ``vgg16``), ``channels=64``,
    ``sim_channels=32``, ``head_channels=32``; any registered backbone works (``small_cnn``
    with small widths on a CPU).
    """

    def __init__(
        self,
        backbone: str = "resnet50",
        backbone_args: Optional[Dict[str, Any]] = None,
        in_channels: Count = 3,
        channels: Count = 64,
        sim_channels: Count = 32,
        head_channels: Count = 32,
    ) -> None:
        super().__init__(backbone, backbone_args, in_channels, channels, head_channels)
        levels = len(self.backbone.out_channels)
        self.aim = AggregateInteraction(self.backbone.out_channels, channels)
        self.sims = nn.ModuleList(SelfInteraction(channels, sim_channels) for _ in range(levels))
        self.fuse = nn.ModuleList(ConvBNAct(channels, channels) for _ in range(levels))

    def decode(self, features: List[torch.Tensor]) -> torch.Tensor:
        if checkpointing(self, self.grad_checkpointing):
            # the recomputation leaves AIM's BatchNorm statistics alone, as run_checkpointed does for the other blocks
            features = checkpointed_call(self.aim, lambda *f: tuple(self.aim(list(f))), *features)
        else:
            features = self.aim(features)
        y = None
        for i in reversed(range(len(features))):
            y = features[i] if y is None else resize_to(y, features[i].shape[-2:]) + features[i]
            y = self.checkpointed(self.fuse[i], self.checkpointed(self.sims[i], y))
        return y
