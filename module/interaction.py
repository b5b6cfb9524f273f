"""MINet's interaction modules (Pang et al., "Multi-scale Interactive Network for Salient
Object Detection", CVPR 2020).

- AIM, the aggregate interaction module: every encoder level is fused with its
  neighbouring levels, each branch computed at its own resolution and exchanging
  resampled features with the adjacent branches, before the result is gathered
  into the level's own branch (plus a residual path).
- SIM, the self-interaction module: inside the decoder, a feature map is split into
  a high- and a low-resolution branch that exchange information twice, and the
  high branch returns as a residual update.

Resampling goes to the exact size of the other branch (average pooling down,
bilinear up), so odd input sizes work at every level.
"""

from __future__ import annotations

from typing import List, Sequence, Tuple

import torch
import torch.nn.functional as F
from torch import nn

from utils.errors import ConfigError
from utils.registry import MODULES


def resize_to(x: torch.Tensor, size: Tuple[int, int]) -> torch.Tensor:
    """``x`` at spatial ``size``: average pooling to shrink, bilinear interpolation to grow."""
    size = tuple(size)
    if tuple(x.shape[-2:]) == size:
        return x
    if x.shape[-2] >= size[0] and x.shape[-1] >= size[1]:
        return F.adaptive_avg_pool2d(x, size)
    return F.interpolate(x, size=size, mode="bilinear", align_corners=False)


def conv3x3(in_channels: int, out_channels: int) -> nn.Conv2d:
    return nn.Conv2d(in_channels, out_channels, 3, padding=1, bias=False)


class BranchInteraction(nn.Module):
    """Two or three branches ordered fine to coarse; one of them (``main``) is the output.

    stage 0: each branch -> ``mid`` channels (conv-BN-ReLU);
    stage 1: each branch sums convs of itself and its adjacent branches, resampled to its size;
    stage 2: the main branch sums convs of all branches;
    stage 3: conv-BN of the main branch + a 1x1 projection of the main input, ReLU.
    """

    def __init__(self, in_channels: Sequence[int], main: int, out_channels: int) -> None:
        super().__init__()
        n = len(in_channels)
        if n not in (2, 3) or not 0 <= main < n:
            raise ConfigError(
                f"BranchInteraction takes 2 or 3 branches and a main index among them, got {n} and {main}"
            )
        self.main = main
        mid = min(in_channels)
        self.stage0 = nn.ModuleList(
            nn.Sequential(conv3x3(c, mid), nn.BatchNorm2d(mid), nn.ReLU(inplace=True)) for c in in_channels
        )
        self.neighbours = [[k for k in (j - 1, j, j + 1) if 0 <= k < n] for j in range(n)]
        self.stage1 = nn.ModuleList(nn.ModuleList(conv3x3(mid, mid) for _ in ks) for ks in self.neighbours)
        self.bn1 = nn.ModuleList(nn.BatchNorm2d(mid) for _ in range(n))
        self.stage2 = nn.ModuleList(conv3x3(mid, mid) for _ in range(n))
        self.bn2 = nn.BatchNorm2d(mid)
        self.stage3 = nn.Sequential(conv3x3(mid, out_channels), nn.BatchNorm2d(out_channels))
        self.identity = nn.Conv2d(in_channels[main], out_channels, 1)

    def forward(self, inputs: Sequence[torch.Tensor]) -> torch.Tensor:
        xs = [block(x) for block, x in zip(self.stage0, inputs)]
        sizes = [x.shape[-2:] for x in xs]
        xs = [
            F.relu(bn(sum(conv(resize_to(xs[k], sizes[j])) for conv, k in zip(convs, ks))))
            for j, (convs, ks, bn) in enumerate(zip(self.stage1, self.neighbours, self.bn1))
        ]
        size = sizes[self.main]
        fused = F.relu(self.bn2(sum(conv(resize_to(x, size)) for conv, x in zip(self.stage2, xs))))
        return F.relu(self.stage3(fused) + self.identity(inputs[self.main]))


@MODULES.register("aim")
class AggregateInteraction(nn.Module):
    """AIM: level ``i`` of a feature pyramid (fine to coarse) interacts with levels ``i-1`` and
    ``i+1``; returns one map per level with ``out_channels`` channels at that level's size."""

    def __init__(self, in_channels: Sequence[int], out_channels: int = 64) -> None:
        super().__init__()
        n = len(in_channels)
        if n < 2:
            raise ConfigError(f"AIM needs at least 2 pyramid levels, got {n}")
        self.levels = nn.ModuleList()
        for i in range(n):
            first, last = max(i - 1, 0), min(i + 1, n - 1)
            self.levels.append(BranchInteraction(list(in_channels[first : last + 1]), i - first, out_channels))

    def forward(self, features: Sequence[torch.Tensor]) -> List[torch.Tensor]:
        if len(features) != len(self.levels):
            raise ValueError(f"AIM was built for {len(self.levels)} levels, got {len(features)}")
        n = len(features)
        return [level(features[max(i - 1, 0) : min(i + 1, n - 1) + 1]) for i, level in enumerate(self.levels)]


@MODULES.register("sim")
class SelfInteraction(nn.Module):
    """SIM: high- and low-resolution (half size) branches with ``channels`` and
    ``low_channels`` exchange features twice; returns ``x`` + the high branch."""

    def __init__(self, channels: int, low_channels: int = 32) -> None:
        super().__init__()
        self.h0 = nn.Sequential(conv3x3(channels, channels), nn.BatchNorm2d(channels), nn.ReLU(inplace=True))
        self.l0 = nn.Sequential(conv3x3(channels, low_channels), nn.BatchNorm2d(low_channels), nn.ReLU(inplace=True))
        self.h2h1, self.l2h1 = conv3x3(channels, channels), conv3x3(low_channels, channels)
        self.l2l1, self.h2l1 = conv3x3(low_channels, low_channels), conv3x3(channels, low_channels)
        self.bnh1, self.bnl1 = nn.BatchNorm2d(channels), nn.BatchNorm2d(low_channels)
        self.h2h2, self.l2h2 = conv3x3(channels, channels), conv3x3(low_channels, channels)
        self.bnh2 = nn.BatchNorm2d(channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        size = x.shape[-2:]
        low = (max((size[0] + 1) // 2, 1), max((size[1] + 1) // 2, 1))
        h = self.h0(x)
        l = self.l0(resize_to(x, low))  # noqa: E741 (the paper's name for the low branch)
        h, l = (  # noqa: E741
            F.relu(self.bnh1(self.h2h1(h) + self.l2h1(resize_to(l, size)))),
            F.relu(self.bnl1(self.l2l1(l) + self.h2l1(resize_to(h, low)))),
        )
        h = F.relu(self.bnh2(self.h2h2(h) + self.l2h2(resize_to(l, size))))
        return x + h
