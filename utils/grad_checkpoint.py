"""Gradient checkpointing: trade recomputation for activation memory."""

from __future__ import annotations

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint


def run_checkpointed(module: nn.Module, x: torch.Tensor, enabled: bool) -> torch.Tensor:
    """``module(x)``, keeping only the input for backward when ``enabled`` and training.

    Non-reentrant checkpointing works with DDP and with inputs that do not require grad.
    """
    if enabled and module.training and torch.is_grad_enabled():
        return checkpoint(module, x, use_reentrant=False)
    return module(x)
