"""The opt levels on native PyTorch: torch.autocast (O1), cast weights + fp32 masters (O2), all low precision (O3)."""

from __future__ import annotations

import contextlib
import logging
from typing import Any, ContextManager, Dict, Optional, Tuple

import torch
from torch import nn

from utils.amp.casting import MasterWeights, add_cast_hooks, cast_model, low_precision_params
from utils.amp.loss_scale import LossScaler
from utils.amp.policy import AmpPolicy

log = logging.getLogger(__name__)


class NativeAmp:
    """One run's precision: casting, loss scaling, unscale -> clip -> step, master copies."""

    def __init__(self, policy: AmpPolicy) -> None:
        self.policy = policy
        self.scaler: Optional[LossScaler] = LossScaler.from_setting(policy.loss_scale) if policy.loss_scale is not None else None
        self.masters: Optional[MasterWeights] = None
        self.skipped_steps = 0
        self._initialized = False

    def initialize(self, model: nn.Module, optimizer: Optional[torch.optim.Optimizer] = None) -> Tuple[nn.Module, Optional[torch.optim.Optimizer]]:
        """Apply the opt level to ``model`` (and ``optimizer``) in place; returns the same objects."""
        if self._initialized:
            raise RuntimeError("amp.initialize was already called for this run; build a new Amp for another model")
        self._initialized = True
        policy = self.policy
        if policy.cast_model:
            low = low_precision_params(model, policy.keep_batchnorm_fp32)
            if optimizer is not None and policy.master_weights:
                self.masters = MasterWeights(optimizer, low)
            cast_model(model, policy.dtype, policy.keep_batchnorm_fp32)
            add_cast_hooks(model, policy.dtype)
        log.info(policy.describe())
        return model, optimizer

    def autocast(self) -> ContextManager:
        if self.policy.autocast:
            return torch.autocast(device_type=self.policy.device_type, dtype=self.policy.dtype)
        return contextlib.nullcontext()

    def backward(self, loss: torch.Tensor) -> None:
        (self.scaler.scale_loss(loss) if self.scaler is not None else loss).backward()

    def step(self, optimizer: torch.optim.Optimizer, clip_grad_norm: Optional[float] = None, clip_grad_value: Optional[float] = None) -> bool:
        """Unscale, clip and step; on overflow skip the step. Returns whether it was taken."""
        if self.masters is not None:
            self.masters.grads_to_masters()
        params = [p for group in optimizer.param_groups for p in group["params"] if p.grad is not None]
        finite = self.scaler.unscale_([p.grad for p in params]) if self.scaler is not None else True
        if finite:
            # Clipping sees the true (unscaled, fp32 master at O2) gradients.
            if clip_grad_norm is not None:
                torch.nn.utils.clip_grad_norm_(params, clip_grad_norm)
            if clip_grad_value is not None:
                torch.nn.utils.clip_grad_value_(params, clip_grad_value)
            optimizer.step()
            if self.masters is not None:
                self.masters.masters_to_model()
        else:
            self.skipped_steps += 1
        if self.scaler is not None:
            self.scaler.update(finite)
            if not finite:
                log.info("gradient overflow: step skipped (%d so far), loss scale now %g", self.skipped_steps, self.scaler.scale)
        return finite

    @property
    def loss_scale(self) -> float:
        return self.scaler.scale if self.scaler is not None else 1.0

    def state_dict(self) -> Dict[str, Any]:
        return {
            "opt_level": self.policy.opt_level,
            "skipped_steps": self.skipped_steps,
            "loss_scaler": self.scaler.state_dict() if self.scaler is not None else None,
            "master_params": self.masters.state_dict() if self.masters is not None else None,
        }

    def load_state_dict(self, state: Dict[str, Any]) -> None:
        """Restore after ``initialize`` and after the model's state (a checkpoint of any level loads)."""
        self.skipped_steps = state.get("skipped_steps", 0)
        if self.scaler is not None and state.get("loss_scaler"):
            self.scaler.load_state_dict(state["loss_scaler"])
        if self.masters is not None:
            self.masters.load_state_dict(state.get("master_params"))
            if state.get("master_params") is None:
                log.info("amp state has no master weights (saved at %s); they start from the model weights", state.get("opt_level", "O0"))
