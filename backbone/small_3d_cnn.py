"""A small 3D CNN for short, low-resolution clips that trains in minutes on a CPU."""

from __future__ import annotations

from torch import nn

from backbone.base import Backbone
from module.conv3d import Conv3dBNAct
from utils.config.arguments import Count, Widths
from utils.registry import BACKBONES


@BACKBONES.register("small_3d_cnn")
class Small3DCNN(Backbone):
    """Stages of two 3x3x3 conv-bn-relu blocks on ``[B, C, T, H, W]``.

    The first stage halves only the spatial size (short clips keep their
    frames for the motion cues); every later stage halves time and space.
    """

    def __init__(self, in_channels: Count = 3, widths: Widths = (16, 32, 64), pretrained: str = "") -> None:
        super().__init__()
        channels = in_channels
        for i, width in enumerate(widths):
            stride = (1, 2, 2) if i == 0 else (2, 2, 2)
            self.stages.append(nn.Sequential(Conv3dBNAct(channels, width, stride=stride), Conv3dBNAct(width, width)))
            channels = width
        self.out_channels = list(widths)
        self.strides = [2 ** (i + 1) for i in range(len(widths))]  # spatial
        self.temporal_strides = [2**i for i in range(len(widths))]
        if pretrained:
            from utils.checkpoint.weights import load_weights

            load_weights(self, pretrained)
