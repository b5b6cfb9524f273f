"""Evaluation metrics as sums that reduce exactly across ranks (``METRICS`` registry)."""

from utils.metrics.base import Metric
from utils.registry import METRICS

__all__ = ["Metric", "build_metric"]


def build_metric(name: str) -> Metric:
    return METRICS.build(name)
