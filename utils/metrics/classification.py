"""Top-k accuracy for classification."""

from __future__ import annotations

from typing import Dict, List, Optional, Sequence

import torch

from utils.metrics.base import Metric, target_labels
from utils.registry import METRICS


@METRICS.register("classification")
class Classification(Metric):
    """``top1`` and ``top5`` accuracy (top-k capped at the number of classes)."""

    def __init__(self, topk: Sequence[int] = (1, 5)) -> None:
        super().__init__()
        self.topk = tuple(topk)

    def update(self, outputs: torch.Tensor, targets) -> None:
        labels = target_labels(targets).to(outputs.device)
        k_max = min(max(self.topk), outputs.shape[1])
        ranked = outputs.topk(k_max, dim=1).indices
        hits = ranked.eq(labels.view(-1, 1))
        for k in self.topk:
            self.add(f"correct{k}", hits[:, : min(k, k_max)].any(dim=1).sum())
        self.add("count", labels.numel())

    def reported_names(self) -> List[str]:
        return [f"top{k}" for k in self.topk]

    def direction(self, name: str) -> Optional[str]:
        return "max" if name in self.reported_names() else None

    def compute(self, sums: Dict[str, torch.Tensor]) -> Dict[str, float]:
        count = sums["count"].item()
        return {f"top{k}": sums[f"correct{k}"].item() / count for k in self.topk}
