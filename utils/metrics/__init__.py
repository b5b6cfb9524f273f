"""Evaluation metrics as sums that reduce exactly across ranks (``METRICS`` registry)."""

from typing import Any, Dict, Optional, Sequence

from utils.metrics.base import Metric
from utils.registry import METRICS

__all__ = ["Metric", "build_metric"]


def build_metric(name: str, extras: Sequence[Dict[str, Any]] = (), num_classes: Optional[int] = None) -> Metric:
    """The task's metric ``name``, with the torchmetrics classes of ``eval.extra_metrics`` beside it
    (``num_classes``: the data's, filled in where a class takes it)."""
    metric = METRICS.build(name)
    if not extras:
        return metric
    from utils.metrics.extra import WithExtraMetrics, build_extras  # torchmetrics only when asked for

    return WithExtraMetrics(metric, build_extras(extras, name, num_classes))
