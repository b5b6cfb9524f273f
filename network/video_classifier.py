"""Clip classifiers: a 3D backbone with spatio-temporal pooling, and a single-frame 2D baseline."""

from __future__ import annotations

from typing import Any, Dict, Literal, Optional, Union

import torch
from torch import nn

from network.classifier import Classifier, DropRate
from utils.config.arguments import Count
from utils.errors import ConfigError
from utils.registry import NETWORKS


def _check_clip(x: torch.Tensor, network: str) -> None:
    if x.dim() != 5:
        raise ConfigError(
            f"network '{network}' takes clips [B, C, T, H, W], got shape {list(x.shape)}; "
            "use a video dataset (video_frames_folder, moving_shapes)"
        )


class SpatioTemporalPool(nn.Module):
    """``[B, C, T, H, W] -> [B, C]``: average over space, then ``avg`` or ``max`` over time."""

    def __init__(self, temporal: str = "avg") -> None:
        super().__init__()
        if temporal not in ("avg", "max"):
            raise ConfigError(f"temporal_pool must be 'avg' or 'max', got '{temporal}'")
        self.temporal = temporal

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.mean(dim=(3, 4))
        return x.mean(dim=2) if self.temporal == "avg" else x.amax(dim=2)


@NETWORKS.register("video_classifier")
class VideoClassifier(Classifier):
    """Clip classifier: 3D backbone -> spatial average -> temporal avg/max -> dropout -> linear."""

    def __init__(
        self,
        num_classes: Count,
        backbone: str = "small_3d_cnn",
        backbone_args: Optional[Dict[str, Any]] = None,
        dropout: DropRate = 0.0,
        temporal_pool: Literal["avg", "max"] = "avg",
    ) -> None:
        super().__init__(num_classes, backbone, backbone_args, dropout)
        self.pool = SpatioTemporalPool(temporal_pool)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        _check_clip(x, "video_classifier")
        return super().forward(x)


@NETWORKS.register("frame_classifier")
class FrameClassifier(Classifier):
    """A 2D image classifier that sees clips one frame at a time (the baseline that ignores time).

    ``frames="middle"`` (or an int) classifies from that single frame of the
    clip; ``frames="all"`` runs the 2D backbone on every frame and averages the
    pooled features, which sees all frames but not their order.
    """

    def __init__(
        self,
        num_classes: Count,
        backbone: str = "small_cnn",
        backbone_args: Optional[Dict[str, Any]] = None,
        dropout: DropRate = 0.0,
        frames: Union[Literal["middle", "all"], int] = "middle",
    ) -> None:
        super().__init__(num_classes, backbone, backbone_args, dropout)
        if not (frames in ("middle", "all") or isinstance(frames, int)):
            raise ConfigError(f"frames must be 'middle', 'all' or a frame index, got {frames!r}")
        self.frames = frames

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        _check_clip(x, "frame_classifier")
        b, c, t, h, w = x.shape
        if self.frames != "all":
            index = t // 2 if self.frames == "middle" else self.frames
            return super().forward(x[:, :, index])
        frames = x.transpose(1, 2).reshape(b * t, c, h, w)
        pooled = self.pool(self.backbone(frames)[-1])  # [B*T, C', 1, 1]
        return self.head(pooled.view(b, t, *pooled.shape[1:]).mean(dim=1))
