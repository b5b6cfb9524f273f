"""Per-rank seeds for python, numpy and torch."""

from __future__ import annotations

import random

import numpy as np
import torch


def seed_everything(seed: int, rank: int = 0) -> None:
    """Seed python, numpy and torch; each rank gets its own stream (seed + rank)."""
    value = seed + rank
    random.seed(value)
    np.random.seed(value % 2**32)
    torch.manual_seed(value)
