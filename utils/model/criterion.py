"""The training objective: a weighted sum of registered losses (``loss`` in the config)."""

from __future__ import annotations

from typing import Any, Dict, List, Sequence, Tuple

import torch
from torch import nn

from utils.registry import LOSSES


class WeightedLoss(nn.Module):
    """``sum(weight_i * loss_i(outputs, targets))`` over the configured criteria."""

    def __init__(self, criteria: Sequence[Tuple[str, float, nn.Module]]) -> None:
        super().__init__()
        self.names = [name for name, _, _ in criteria]
        self.weights = [weight for _, weight, _ in criteria]
        self.criteria = nn.ModuleList(c for _, _, c in criteria)

    def forward(self, outputs: Any, targets: Any) -> torch.Tensor:
        total = None
        for weight, criterion in zip(self.weights, self.criteria):
            term = weight * criterion(outputs, targets)
            total = term if total is None else total + term
        return total


def build_criterion(specs: List[Dict[str, Any]]) -> WeightedLoss:
    """``[{name: cross_entropy, weight: 1.0, label_smoothing: 0.1}, ...]`` -> one criterion."""
    criteria = []
    for spec in specs:
        spec = dict(spec)
        name = spec.pop("name")
        weight = float(spec.pop("weight", 1.0))
        criteria.append((name, weight, LOSSES.build(name, **spec)))
    return WeightedLoss(criteria)
