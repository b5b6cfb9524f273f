"""Build helpers: turn config sections into objects through the registries.

Only these helpers and ``main.py`` read the config; everything they build takes
plain typed arguments.
"""

from __future__ import annotations

import copy
import logging
from typing import Any, Dict, List, Sequence, Tuple

import torch
from torch import nn

from utils.config import ModelConfig
from utils.metrics.base import Metric
from utils.registry import LOSSES, METRICS, NETWORKS

log = logging.getLogger(__name__)


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


def build_network(cfg: ModelConfig) -> nn.Module:
    """The configured network, with gradient checkpointing switched as asked."""
    model = NETWORKS.build(cfg.name, **cfg.args)
    if cfg.grad_checkpointing:
        if not hasattr(model, "set_grad_checkpointing"):
            raise ValueError(f"network '{cfg.name}' has no set_grad_checkpointing(); set model.grad_checkpointing=false")
        model.set_grad_checkpointing(True)
    return model


def build_metric(name: str) -> Metric:
    return METRICS.build(name)


def count_parameters(model: nn.Module) -> Tuple[int, int]:
    """(total, trainable) parameter counts."""
    total = sum(p.numel() for p in model.parameters())
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    return total, trainable


def count_flops(model: nn.Module, input_size: Sequence[int]) -> float:
    """Multiply-accumulates of one sample (thop), or NaN when thop cannot trace the model."""
    try:
        from thop import profile

        probe = copy.deepcopy(model).cpu().eval()  # thop adds buffers; keep them off the real model
        with torch.no_grad():
            macs, _ = profile(probe, inputs=(torch.zeros(1, *input_size),), verbose=False)
        return float(macs)
    except Exception as err:  # a FLOP count is informative only; never fail a run on it
        log.warning("could not count FLOPs for input %s: %s", list(input_size), err)
        return float("nan")
