"""Exponential moving average (EMA) of a network's weights.

After every optimizer step::

    d_t   = min(decay, (1 + t) / (10 + t))   with warmup (t = updates before this one)
    d_t   = decay                            without warmup
    ema  <- d_t * ema + (1 - d_t) * weights

over every floating-point parameter and buffer (BatchNorm running statistics
included, as timm's ModelEmaV2 does); integer buffers (``num_batches_tracked``)
are copied. The warm-up keeps early averages from being dominated by the
random initial weights; it is TensorFlow's ``num_updates`` rule.
"""

from __future__ import annotations

import copy
import logging
from typing import Any, Dict, Optional

import torch
from torch import nn

from utils.config.rules import EMA_DECAY, ema_settings
from utils.distributed.parallel import unwrap

log = logging.getLogger(__name__)


class ModelEma:
    """A frozen copy of ``model`` that follows its weights as an EMA; ``self.module`` evaluates it."""

    def __init__(self, model: nn.Module, decay: float = EMA_DECAY, warmup: bool = True) -> None:
        if not 0.0 < decay < 1.0:
            raise ValueError(f"ModelEma: decay must be in (0, 1), got {decay}")  # train.ema is checked with the config
        self.module = copy.deepcopy(model).eval()
        for param in self.module.parameters():
            param.requires_grad_(False)
        self.decay = decay
        self.warmup = warmup
        self.updates = 0

    def current_decay(self) -> float:
        """The decay the next update uses."""
        if self.warmup:
            return min(self.decay, (1.0 + self.updates) / (10.0 + self.updates))
        return self.decay

    @torch.no_grad()
    def update(self, model: nn.Module, skipped: Optional[torch.Tensor] = None) -> None:
        """Move the average towards ``model``'s current weights (the network or its DDP wrapper).

        ``skipped``: the step's device flag (1.0: the optimizer skipped it); where it is set the
        average is left as it is, without a host read. ``updates`` counts the update until the
        caller learns of the skip (``uncount``).
        """
        model = unwrap(model)
        decay = self.current_decay()
        own = self.module.state_dict()
        keep = None if skipped is None else skipped.reshape(()).bool()
        for name, value in model.state_dict().items():
            target = own[name]
            if target.is_floating_point():
                # lerp: ema + (1 - d) * (w - ema); exact when ema == w (frozen tensors stay equal)
                weight = (
                    1.0 - decay if keep is None else torch.where(keep, 0.0, 1.0 - decay).to(target.device, target.dtype)
                )
                target.lerp_(value.to(target.dtype), weight)
            else:
                target.copy_(value if keep is None else torch.where(keep.to(target.device), target, value))
        self.updates += 1

    def uncount(self, steps: int) -> None:
        """Steps the average was updated for but the optimizer skipped on the device (read later)."""
        self.updates -= steps

    def state_dict(self) -> Dict[str, Any]:
        """The averaged weights (a plain network state_dict) and the number of updates so far."""
        return {"weights": self.module.state_dict(), "updates": self.updates}

    def load_state_dict(self, state: Dict[str, Any]) -> None:
        self.module.load_state_dict(state["weights"])
        self.updates = int(state["updates"])


def build_ema(model: nn.Module, spec: Optional[Dict[str, Any]]) -> Optional[ModelEma]:
    """``train.ema: {decay: 0.9998, warmup: true}`` -> a ModelEma of ``model``; None when unset."""
    if spec is None:
        return None
    decay, warmup = ema_settings(spec)
    ema = ModelEma(model, decay=decay, warmup=warmup)
    log.info("EMA of weights: decay %g, warmup %s", ema.decay, ema.warmup)
    return ema
