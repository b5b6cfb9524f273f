"""Convolution + normalization + activation, the block most networks are made of."""

from __future__ import annotations

from torch import nn

from utils.registry import MODULES


@MODULES.register("conv_bn_act")
class ConvBNAct(nn.Sequential):
    """``Conv2d -> BatchNorm2d -> ReLU`` (``act=False`` leaves out the activation)."""

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: int = 3,
        stride: int = 1,
        dilation: int = 1,
        groups: int = 1,
        act: bool = True,
    ) -> None:
        padding = dilation * (kernel_size - 1) // 2
        super().__init__(
            nn.Conv2d(in_channels, out_channels, kernel_size, stride, padding, dilation, groups, bias=False),
            nn.BatchNorm2d(out_channels),
            nn.ReLU(inplace=True) if act else nn.Identity(),
        )
