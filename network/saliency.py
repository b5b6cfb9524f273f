"""Shared frame of the saliency networks: backbone -> decoder -> head, logits at input size."""

from __future__ import annotations

import functools
from typing import Any, Dict, List, Optional, Tuple

import torch
import torch.nn.functional as F
from torch import nn

from module.conv import ConvBNAct
from utils.model.grad_checkpoint import checkpointed_call, checkpointing, run_checkpointed
from utils.registry import BACKBONES


class SaliencyNetwork(nn.Module):
    """Subclasses build their decoder and implement ``decode(features) -> [B, C, h, w]``
    (the finest decoded map, ``decoder_channels`` channels).

    ``forward`` returns one logit map ``[B, 1, H, W]`` at the input's size, whatever the
    size (odd sizes included): the decoded map is interpolated to it before the head.
    """

    def __init__(
        self,
        backbone: str,
        backbone_args: Optional[Dict[str, Any]],
        in_channels: int,
        decoder_channels: int,
        head_channels: int,
    ) -> None:
        super().__init__()
        self.backbone = BACKBONES.build(backbone, **{"in_channels": in_channels, **(backbone_args or {})})
        self.head = nn.Sequential(ConvBNAct(decoder_channels, head_channels), nn.Conv2d(head_channels, 1, 1))
        self.grad_checkpointing = False

    def set_grad_checkpointing(self, enabled: bool = True) -> None:
        """Recompute backbone stages, decoder blocks and the head in backward instead of storing them."""
        self.grad_checkpointing = enabled
        self.backbone.set_grad_checkpointing(enabled)

    def checkpointed(self, module: nn.Module, x: torch.Tensor) -> torch.Tensor:
        return run_checkpointed(module, x, self.grad_checkpointing)

    def decode(self, features: List[torch.Tensor]) -> torch.Tensor:
        raise NotImplementedError

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        decoded = self.decode(self.backbone(x))
        head = functools.partial(self._head_at, size=tuple(x.shape[-2:]))
        if checkpointing(self, self.grad_checkpointing):
            # the head runs at the input's size: checkpointed with the upsampling, it keeps only the decoded map
            # (a quarter of the pixels) where it kept its input, its conv's and its BatchNorm's outputs (MINet-R at
            # 320x320: 105 MiB against 800 per 16 images)
            return checkpointed_call(self.head, head, decoded)
        return head(decoded)

    def _head_at(self, decoded: torch.Tensor, size: Tuple[int, ...]) -> torch.Tensor:
        if decoded.shape[-2:] != size:
            decoded = F.interpolate(decoded, size=size, mode="bilinear", align_corners=False)
        return self.head(decoded)
