"""Mixed precision behind apex's opt levels (O0 here; O1-O3 arrive with the amp work).

The training loop only talks to ``Amp``: ``initialize``, ``autocast``,
``backward``, ``step``, ``state_dict``; the precision policy lives here alone.
"""

from __future__ import annotations

import contextlib
from typing import Any, ContextManager, Dict, Optional, Tuple

import torch
from torch import nn

from utils.config import AmpConfig


class Amp:
    """Full precision: autocast is a no-op and every step is taken."""

    def __init__(self, cfg: AmpConfig, device: torch.device) -> None:
        if cfg.opt_level != "O0":
            raise NotImplementedError(f"amp.opt_level={cfg.opt_level} is not available yet; use O0")
        self.cfg = cfg
        self.device = device
        self.skipped_steps = 0

    def initialize(self, model: nn.Module, optimizer: torch.optim.Optimizer) -> Tuple[nn.Module, torch.optim.Optimizer]:
        return model, optimizer

    def autocast(self) -> ContextManager:
        return contextlib.nullcontext()

    def backward(self, loss: torch.Tensor) -> None:
        loss.backward()

    def step(self, optimizer: torch.optim.Optimizer, clip_grad_norm: Optional[float] = None, clip_grad_value: Optional[float] = None) -> bool:
        """Clip, step, and say whether the step was taken."""
        params = [p for group in optimizer.param_groups for p in group["params"] if p.grad is not None]
        if clip_grad_norm is not None:
            torch.nn.utils.clip_grad_norm_(params, clip_grad_norm)
        if clip_grad_value is not None:
            torch.nn.utils.clip_grad_value_(params, clip_grad_value)
        optimizer.step()
        return True

    def state_dict(self) -> Dict[str, Any]:
        return {"skipped_steps": self.skipped_steps}

    def load_state_dict(self, state: Dict[str, Any]) -> None:
        self.skipped_steps = state.get("skipped_steps", 0)
