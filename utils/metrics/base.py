"""The metric protocol: accumulate sums, reduce them over ranks, then compute.

A metric keeps only additive state (counts, sums of per-sample values, summed
curves, per-video score sums), so summing each rank's state over disjoint slices
gives exactly the state one process would have built on the whole split.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Dict, List, Optional

import torch

from utils.distributed.ops import all_reduce_sums
from utils.errors import DataError


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

    def reported_names(self) -> Optional[List[str]]:
        """The names ``compute`` reports, known before any data is seen, so that ``eval.monitor`` is
        checked when the config is loaded; None when they depend on the data (then it is checked
        at the first validation)."""
        return None

    def direction(self, name: str) -> Optional[str]:
        """``max`` when a higher ``name`` is better, ``min`` when a lower one is; None when the
        metric does not say (``eval.monitor_mode`` must then be given)."""
        return None

    def result(self) -> Dict[str, float]:
        """Reduce the sums over all ranks and compute the final values (same on every rank)."""
        return self.compute(all_reduce_sums(dict(self.sums)))

    def prediction_writer(self, folder: Path) -> Optional[Callable[[Any, Any, Any], None]]:
        """An ``on_batch(inputs, outputs, targets)`` callback for ``evaluate`` that writes this
        task's predictions under ``folder``, or None when the task has nothing to write."""
        return None


def target_tensor(targets: Any, *keys: str) -> torch.Tensor:
    """A tensor target as is, or the first of ``keys`` found in a dict target."""
    if not isinstance(targets, dict):
        return targets
    for key in keys:
        if key in targets:
            return targets[key]
    raise DataError(f"dict target has keys {sorted(targets)}; expected one of {list(keys)}")


def target_labels(targets: Any) -> torch.Tensor:
    """Class labels from a tensor target or a dict target with a ``label`` entry."""
    return target_tensor(targets, "label")


def target_mask(targets: Any) -> torch.Tensor:
    """A dense target (e.g. a saliency mask ``[B, 1, H, W]``) from a tensor or a ``{mask: ...}`` dict."""
    return target_tensor(targets, "mask")
