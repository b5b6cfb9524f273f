"""The metric protocol: accumulate sums, reduce them over ranks, then compute.

A metric keeps only additive state (counts, sums of per-sample values, summed
curves, per-video score sums), so summing each rank's state over disjoint shards
gives exactly the state one process would have built on the whole split.
"""

from __future__ import annotations

from typing import Any, Dict

import torch

from utils.dist import all_reduce_sums


class Metric:
    """Subclasses implement ``update`` (calling ``add``) and ``compute``."""

    def __init__(self) -> None:
        self.sums: Dict[str, torch.Tensor] = {}

    def reset(self) -> None:
        self.sums = {}

    def add(self, name: str, value: Any) -> None:
        """Add ``value`` (a number or tensor) into the running sum ``name`` (float64, CPU)."""
        value = torch.as_tensor(value).detach().to("cpu", torch.float64)
        if name in self.sums:
            self.sums[name] += value
        else:
            self.sums[name] = value.clone()

    def update(self, outputs: Any, targets: Any) -> None:
        raise NotImplementedError

    def compute(self, sums: Dict[str, torch.Tensor]) -> Dict[str, float]:
        raise NotImplementedError

    def result(self) -> Dict[str, float]:
        """Reduce the sums over all ranks and compute the final values (same on every rank)."""
        return self.compute(all_reduce_sums(dict(self.sums)))


def target_labels(targets: Any) -> torch.Tensor:
    """Class labels from a tensor target or a dict target with a ``label`` entry."""
    return targets["label"] if isinstance(targets, dict) else targets
