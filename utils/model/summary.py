"""Parameter and FLOP counts of a network, logged at the start of a run."""

from __future__ import annotations

import copy
import logging
from typing import Sequence, Tuple

import torch
from torch import nn

log = logging.getLogger(__name__)


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
