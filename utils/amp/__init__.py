"""Mixed precision behind apex's opt levels O0/O1/O2/O3 (the table in DESIGN.md and README.md).

The training loop only talks to ``Amp``::

    amp = Amp(cfg.amp, device)
    model, optimizer = amp.initialize(model, optimizer)
    with amp.autocast():
        loss = criterion(model(x), y)
    amp.backward(loss)
    taken = amp.step(optimizer, clip_grad_norm, clip_grad_value)  # False: overflow, step skipped

The native backend implements every level with PyTorch; the apex backend is
used only where an apex with ``apex.amp`` (before 25.07) is installed and the
run is on CUDA.
"""

from __future__ import annotations

from typing import Any, ContextManager, Dict, Optional, Tuple, Union

import torch
from torch import nn

from utils.amp.apex_backend import ApexAmp
from utils.amp.loss_scale import LossScaler
from utils.amp.native import NativeAmp
from utils.amp.policy import AmpPolicy, apex_amp_available, resolve_policy
from utils.config import AmpConfig

__all__ = ["Amp", "AmpPolicy", "LossScaler", "apex_amp_available", "resolve_policy"]


class Amp:
    """The precision of one run, selected by ``cfg.opt_level``; delegates to the chosen backend."""

    def __init__(self, cfg: AmpConfig, device: torch.device) -> None:
        self.policy = resolve_policy(cfg, device)
        self.backend: Union[NativeAmp, ApexAmp] = ApexAmp(self.policy) if self.policy.backend == "apex" else NativeAmp(self.policy)

    def initialize(self, model: nn.Module, optimizer: Optional[torch.optim.Optimizer] = None) -> Tuple[nn.Module, Optional[torch.optim.Optimizer]]:
        """Apply the opt level; call before DDP wrapping and before loading optimizer state."""
        return self.backend.initialize(model, optimizer)

    def autocast(self) -> ContextManager:
        """The context for forward and loss (torch.autocast at O1, a no-op otherwise)."""
        return self.backend.autocast()

    def backward(self, loss: torch.Tensor) -> None:
        """``loss.backward()``, with the loss scaled when the level scales."""
        self.backend.backward(loss)

    def step(self, optimizer: torch.optim.Optimizer, clip_grad_norm: Optional[float] = None, clip_grad_value: Optional[float] = None) -> bool:
        """Unscale, clip, step; False when an overflow made it skip the step."""
        return self.backend.step(optimizer, clip_grad_norm, clip_grad_value)

    @property
    def skipped_steps(self) -> int:
        return self.backend.skipped_steps

    def state_dict(self) -> Dict[str, Any]:
        """Loss scale, skipped-step count and (O2) the fp32 master weights, for checkpoints."""
        return {"backend": self.policy.backend, **self.backend.state_dict()}

    def load_state_dict(self, state: Dict[str, Any]) -> None:
        """Restore a checkpoint's amp state (after ``initialize`` and after the model's weights)."""
        if state.get("backend", self.policy.backend) != self.policy.backend:
            state = {"skipped_steps": state.get("skipped_steps", 0)}  # the other backend's scaler state does not transfer
        self.backend.load_state_dict(state)
