"""A small CNN for 8x8 to 32x32 inputs that trains in seconds on a CPU."""

from __future__ import annotations

from torch import nn

from backbone.base import Backbone
from module.conv import ConvBNAct
from utils.config.arguments import Count, Widths
from utils.registry import BACKBONES


@BACKBONES.register("small_cnn")
class SmallCNN(Backbone):
    """Stages of two conv-bn-relu blocks; every stage after the first halves the size."""

    def __init__(self, in_channels: Count = 1, widths: Widths = (32, 64, 128), pretrained: str = "") -> None:
        super().__init__()
        channels = in_channels
        for i, width in enumerate(widths):
            stride = 1 if i == 0 else 2
            self.stages.append(nn.Sequential(ConvBNAct(channels, width, stride=stride), ConvBNAct(width, width)))
            channels = width
        self.out_channels = list(widths)
        self.strides = [2**i for i in range(len(widths))]
        if pretrained:
            from utils.checkpoint.weights import load_weights

            load_weights(self, pretrained)
