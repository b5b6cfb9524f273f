"""Region losses for saliency maps: IoU and MINet's consistency-enhanced loss (CEL).

Both take logits ``[B, 1, H, W]`` and float masks in [0, 1] of the same shape
(or ``{mask: ...}``); combine them with ``bce_with_logits`` through the config's
weighted ``loss:`` list, e.g. MINet's ``BCE + CEL``.
"""

from __future__ import annotations

from typing import Annotated, Any, Tuple

import torch
from torch import nn

from utils.config.arguments import above
from utils.metrics.base import target_mask
from utils.registry import LOSSES


def probabilities_and_mask(outputs: torch.Tensor, targets: Any) -> Tuple[torch.Tensor, torch.Tensor]:
    """``(sigmoid(outputs), mask)`` in float32, with the mask's shape checked against the outputs."""
    mask = target_mask(targets).float()
    if mask.dim() == outputs.dim() - 1:
        mask = mask.unsqueeze(1)
    if mask.shape != outputs.shape:
        raise ValueError(
            f"saliency loss: outputs {list(outputs.shape)} and mask {list(mask.shape)} differ; the network must predict at the mask's size"
        )
    return outputs.float().sigmoid(), mask


@LOSSES.register("iou")
class IoULoss(nn.Module):
    """``1 - soft IoU`` per image, averaged over the batch."""

    def __init__(self, eps: Annotated[float, above(0)] = 1e-6) -> None:
        super().__init__()
        self.eps = eps

    def forward(self, outputs: torch.Tensor, targets: Any) -> torch.Tensor:
        prob, mask = probabilities_and_mask(outputs, targets)
        inter = (prob * mask).flatten(1).sum(1)
        union = (prob + mask).flatten(1).sum(1) - inter
        return (1.0 - (inter + self.eps) / (union + self.eps)).mean()


@LOSSES.register("cel")
class ConsistencyEnhancedLoss(nn.Module):
    """MINet's CEL: ``(|FP| + |FN|) / (|FP| + 2|TP| + |FN|)`` with soft counts.

    With ``p`` the saliency and ``g`` the mask, ``FP + FN = sum(p - pg) + sum(g - pg)`` and
    ``FP + 2TP + FN = sum(p) + sum(g)``: a region-level term whose gradient does not
    shrink with the object's size, which keeps predictions uniform inside objects.
    ``per_image=True`` (default) takes the ratio per image and averages over the batch,
    so the loss is a per-sample mean (exact under distributed evaluation, independent
    of the batch's composition); ``per_image=False`` sums the counts over the whole
    batch first, as MINet's released code does.
    """

    def __init__(self, per_image: bool = True, eps: Annotated[float, above(0)] = 1e-6) -> None:
        super().__init__()
        self.per_image = per_image
        self.eps = eps

    def forward(self, outputs: torch.Tensor, targets: Any) -> torch.Tensor:
        prob, mask = probabilities_and_mask(outputs, targets)
        dims = tuple(range(1, prob.dim())) if self.per_image else tuple(range(prob.dim()))
        inter = prob * mask
        numerator = (prob - inter).sum(dims) + (mask - inter).sum(dims)
        return (numerator / (prob.sum(dims) + mask.sum(dims) + self.eps)).mean()
