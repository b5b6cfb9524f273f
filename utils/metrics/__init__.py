"""Evaluation metrics as sums that reduce exactly across ranks (``METRICS`` registry)."""

from utils.metrics.base import Metric

__all__ = ["Metric"]
