"""3D convolution + normalization + activation, the block of clip (video) networks."""

from __future__ import annotations

from typing import Sequence, Union

from torch import nn

from utils.registry import MODULES

Size3 = Union[int, Sequence[int]]


def _triple(value: Size3) -> tuple:
    return tuple(value) if isinstance(value, (list, tuple)) else (value, value, value)


@MODULES.register("conv3d_bn_act")
class Conv3dBNAct(nn.Sequential):
    """``Conv3d -> BatchNorm3d -> ReLU`` on ``[B, C, T, H, W]``; sizes are ints or (t, h, w)."""

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: Size3 = 3,
        stride: Size3 = 1,
        groups: int = 1,
        act: bool = True,
    ) -> None:
        kernel = _triple(kernel_size)
        padding = tuple(k // 2 for k in kernel)
        super().__init__(
            nn.Conv3d(in_channels, out_channels, kernel, _triple(stride), padding, groups=groups, bias=False),
            nn.BatchNorm3d(out_channels),
            nn.ReLU(inplace=True) if act else nn.Identity(),
        )
