"""torchvision's 18-layer video ResNets (r3d_18, mc3_18, r2plus1d_18) as 5-stage backbones.

Inputs are clips ``[B, C, T, H, W]``. Weights come only from a local file
(``pretrained: path``) holding torchvision's state_dict for that architecture,
e.g. its Kinetics-400 checkpoints; nothing is downloaded at run time.
"""

from __future__ import annotations

import importlib

from torch import nn

from backbone.base import Backbone
from utils.config.arguments import Count
from utils.registry import BACKBONES


class VideoResNetBackbone(Backbone):
    """Stages: stem, layer1, layer2, layer3, layer4 (spatial strides 2, 2, 4, 8, 16)."""

    def __init__(self, arch: str, in_channels: Count = 3, pretrained: str = "") -> None:
        super().__init__()
        # mc3_18 keeps full time in layers 2-4 (2D convolutions there); the others halve it.
        temporal = [1, 1, 1, 1, 1] if arch == "mc3_18" else [1, 1, 2, 4, 8]
        # imported here: about 1 s
        net = getattr(importlib.import_module("torchvision.models.video"), arch)(weights=None)
        if pretrained:
            from utils.checkpoint.weights import load_weights

            load_weights(net, pretrained)  # torchvision's keys: load before the net is split into stages
        if in_channels != 3:
            first = net.stem[0]
            net.stem[0] = nn.Conv3d(
                in_channels, first.out_channels, first.kernel_size, first.stride, first.padding, bias=False
            )
        self.stages.extend([net.stem, net.layer1, net.layer2, net.layer3, net.layer4])
        self.out_channels = [64, 64, 128, 256, 512]
        self.strides = [2, 2, 4, 8, 16]  # spatial
        self.temporal_strides = temporal


def _video_resnet(arch: str) -> type:
    def __init__(self, in_channels: Count = 3, pretrained: str = "") -> None:
        VideoResNetBackbone.__init__(self, arch, in_channels, pretrained)

    doc = f"torchvision {arch} (video ResNet-18) as a 5-stage backbone on [B, C, T, H, W] clips."
    cls = type(arch, (VideoResNetBackbone,), {"__init__": __init__, "__doc__": doc})
    return BACKBONES.register(arch)(cls)


R3D18 = _video_resnet("r3d_18")
MC318 = _video_resnet("mc3_18")
R2Plus1D18 = _video_resnet("r2plus1d_18")
