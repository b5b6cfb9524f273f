"""The training objective: a weighted sum of registered losses (``loss`` in the config).

Each loss gets the network's prediction, or the output its ``output`` names
(``utils/model/outputs.py``), and must return a scalar.
"""

from __future__ import annotations

from typing import Any, Dict, List, NamedTuple, Sequence

import torch
from torch import nn

from utils.model.outputs import PREDICTION, Selector, check_loss_value, select
from utils.registry import LOSSES


class Term(NamedTuple):
    name: str
    weight: float
    output: Selector  # what of the network's outputs the loss takes (None: the prediction)


class WeightedLoss(nn.Module):
    """``sum(weight_i * loss_i(output_i, targets))`` over the configured criteria."""

    def __init__(self, terms: Sequence[Term], criteria: Sequence[nn.Module], prediction_key: str = PREDICTION) -> None:
        super().__init__()
        self.terms = list(terms)
        self.criteria = nn.ModuleList(criteria)
        self.prediction_key = prediction_key

    def forward(self, outputs: Any, targets: Any) -> torch.Tensor:
        total = None
        for term, criterion in zip(self.terms, self.criteria):
            value = criterion(select(outputs, term.output, self.prediction_key), targets)
            check_loss_value(value, criterion, term.output)
            total = term.weight * value if total is None else total + term.weight * value
        return total


def build_criterion(specs: List[Dict[str, Any]], prediction_key: str = PREDICTION) -> WeightedLoss:
    """``[{name: cross_entropy, weight: 1.0, label_smoothing: 0.1}, {name: cross_entropy, output: aux, weight: 0.4}]`` -> one criterion."""
    terms, criteria = [], []
    for spec in specs:
        spec = dict(spec)
        name = spec.pop("name")
        terms.append(Term(name, float(spec.pop("weight", 1.0)), spec.pop("output", None)))
        criteria.append(LOSSES.build(name, **spec))
    return WeightedLoss(terms, criteria, prediction_key)
