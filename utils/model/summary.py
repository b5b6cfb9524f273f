"""Parameter and FLOP counts of a network, logged at the start of a run."""

from __future__ import annotations

import copy
import logging
from typing import Optional, Sequence, Tuple

import torch
from torch import nn

log = logging.getLogger(__name__)


def count_parameters(model: nn.Module) -> Tuple[int, int]:
    """(total, trainable) parameter counts."""
    total = sum(p.numel() for p in model.parameters())
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    return total, trainable


def has_batchnorm(model: nn.Module) -> bool:
    """Whether ``model`` normalizes with batch statistics in training (any BatchNorm, SyncBN included)."""
    return any(isinstance(m, nn.modules.batchnorm._BatchNorm) for m in model.modules())


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


def log_summary(model: nn.Module, name: str, input_size: Optional[Sequence[int]], count_macs: bool) -> None:
    """Log the parameter counts and (with ``count_macs``, on rank 0) the MACs of one sample."""
    total, trainable = count_parameters(model)
    macs = count_flops(model, input_size) if count_macs and input_size else float("nan")
    log.info(
        "network '%s': %.3fM parameters (%.3fM trainable), %.4f GMACs at input %s",
        name,
        total / 1e6,
        trainable / 1e6,
        macs / 1e9,
        input_size,
    )
