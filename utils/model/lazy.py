"""Lazy modules (``nn.LazyLinear``, ``nn.LazyConv2d``, ...) get their weights from one dummy forward.

Their parameters have no shape until the first forward, so parameter
counting, pretrained loading, freezing, the optimizer, amp and DDP would all
fail on them. ``materialize`` runs one forward at ``model.input_size`` right
after the network is built: in eval mode (BatchNorm statistics untouched) and
without gradients, under a forked random generator (the streams that follow
are the same as for a network without lazy modules).
"""

from __future__ import annotations

from typing import Optional, Sequence

import torch
from torch import nn
from torch.nn.modules.lazy import LazyModuleMixin

from utils.errors import ConfigError


def has_lazy_parameters(model: nn.Module) -> bool:
    """Whether any module of ``model`` still has uninitialized (lazy) parameters or buffers."""
    return any(isinstance(m, LazyModuleMixin) and m.has_uninitialized_params() for m in model.modules())


def materialize(model: nn.Module, input_size: Optional[Sequence[int]], name: str) -> None:
    """Create the weights of ``model``'s lazy modules with one forward of a zero batch at ``input_size``."""
    if not has_lazy_parameters(model):
        return
    if not input_size or any(not isinstance(d, int) or isinstance(d, bool) or d < 1 for d in input_size):
        raise ConfigError(
            f"network '{name}' has lazy modules (e.g. nn.LazyLinear) whose weights are created by a first forward, "
            f"but model.input_size={input_size!r} is not one sample's shape; set it, e.g. model.input_size=[1,8,8] (C,H,W) or [C,T,H,W]"
        )
    modes = {module: module.training for module in model.modules()}
    model.eval()
    try:
        with torch.no_grad(), torch.random.fork_rng(devices=[]):
            model(torch.zeros(2, *input_size))
    except Exception as err:
        if hasattr(err, "add_note"):  # Python >= 3.11: keep the traceback, say when it happened
            err.add_note(
                f"(raised while creating the weights of the lazy modules of network '{name}' with a zero batch of model.input_size={list(input_size)})"
            )
        raise
    finally:
        for module, training in modes.items():
            module.training = training
    if has_lazy_parameters(model):
        raise ConfigError(
            f"network '{name}' still has uninitialized lazy parameters after a forward at model.input_size={list(input_size)}: its forward does not use every lazy module"
        )
