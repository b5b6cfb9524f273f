"""The opt levels on native PyTorch: torch.autocast (O1), cast weights + fp32 masters (O2), all low precision (O3)."""

from __future__ import annotations

import contextlib
import logging
from typing import Any, ContextManager, Dict, List, Optional, Tuple

import torch
from torch import nn

from utils.amp.casting import (
    MasterWeights,
    add_cast_hooks,
    cast_model,
    low_precision_params,
)
from utils.amp.loss_scale import LossScaler, unscale_and_check_
from utils.amp.outcome import ClipOptions, StepOutcome, StepResult
from utils.amp.policy import AmpPolicy
from utils.optim.impl import step_unless, takes_found_inf

log = logging.getLogger(__name__)


class NativeAmp:
    """One run's precision: casting, loss scaling, unscale -> clip -> step, master copies."""

    def __init__(self, policy: AmpPolicy) -> None:
        self.policy = policy
        self.scaler: Optional[LossScaler] = (
            LossScaler.from_setting(policy.loss_scale) if policy.loss_scale is not None else None
        )
        self.masters: Optional[MasterWeights] = None
        self.skipped_steps = 0
        self._initialized = False

    def initialize(
        self, model: nn.Module, optimizer: Optional[torch.optim.Optimizer] = None
    ) -> Tuple[nn.Module, Optional[torch.optim.Optimizer]]:
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

    def uncast(self) -> ContextManager:
        return contextlib.nullcontext()

    def zero_grad(self, optimizer: torch.optim.Optimizer) -> None:
        optimizer.zero_grad(set_to_none=True)

    def backward(self, loss: torch.Tensor) -> None:
        (self.scaler.scale_loss(loss) if self.scaler is not None else loss).backward()

    def apply_step(
        self, optimizer: torch.optim.Optimizer, clip: ClipOptions = ClipOptions(), check_finite: bool = False
    ) -> StepOutcome:
        """Unscale, clip and step; skip the update where a gradient is not finite (loss scaling, or ``check_finite``).

        Reads nothing when nothing can skip the step, or when the optimizer takes ``found_inf``
        (fused kernels) and skips on the device; other optimizers need one read of the flag.
        """
        if self.masters is not None:
            self.masters.grads_to_masters()
        params = [p for group in optimizer.param_groups for p in group["params"] if p.grad is not None]
        grads = [p.grad for p in params]
        found_inf = (
            self.scaler.check_and_unscale_(grads)
            if self.scaler is not None
            else unscale_and_check_(grads)
            if check_finite
            else None
        )
        if found_inf is None:
            self._clip_and_step(optimizer, params, clip)
            return StepOutcome(StepResult.TAKEN)
        if takes_found_inf(optimizer):
            # a skipped step's NaN gradients are clipped to NaN: never applied
            self._clip_and_step(optimizer, params, clip, found_inf)
            if self.scaler is not None:
                self.scaler.update_from(found_inf)
            return StepOutcome(StepResult.ON_DEVICE, found_inf)
        taken = found_inf.item() == 0  # the one read per step of a non-fused optimizer that may skip
        if taken:
            self._clip_and_step(optimizer, params, clip)
        if self.scaler is not None:
            self.scaler.update_from(found_inf)
            if not taken:
                self.count_skipped(1)
        return StepOutcome.decided(taken, found_inf)

    def _clip_and_step(
        self,
        optimizer: torch.optim.Optimizer,
        params: List[torch.Tensor],
        clip: ClipOptions,
        found_inf: Optional[torch.Tensor] = None,
    ) -> None:
        # Clipping sees the true (unscaled, fp32 master at O2) gradients.
        if clip.norm is not None:
            torch.nn.utils.clip_grad_norm_(params, clip.norm)
        if clip.value is not None:
            torch.nn.utils.clip_grad_value_(params, clip.value)
        if found_inf is None:
            optimizer.step()
        else:
            step_unless(optimizer, found_inf)
        if self.masters is not None:
            self.masters.masters_to_model()

    def count_skipped(self, steps: int, where: str = "") -> None:
        """Count ``steps`` overflow-skipped steps (found at a sync point when the device decided)."""
        self.skipped_steps += steps
        if self.scaler is not None and steps:
            log.info(
                "gradient overflow: step skipped%s (%d so far), loss scale now %g",
                where,
                self.skipped_steps,
                self.scaler.scale,
            )

    @property
    def loss_scale(self) -> float:
        return self.scaler.scale if self.scaler is not None else 1.0

    def state_dict(self) -> Dict[str, Any]:
        return {
            "opt_level": self.policy.opt_level,
            "skipped_steps": self.skipped_steps,
            "loss_scaler": self.scaler.state_dict() if self.scaler is not None else None,
            "master_params": self.masters.state_dict() if self.masters is not None else None,
            "master_names": self.masters.names if self.masters is not None else None,
        }

    def load_state_dict(self, state: Dict[str, Any]) -> None:
        """Restore after ``initialize`` and after the model's state (a checkpoint of any level loads)."""
        self.skipped_steps = state.get("skipped_steps", 0)
        if self.scaler is not None and state.get("loss_scaler"):
            self.scaler.load_state_dict(state["loss_scaler"])
        if self.masters is not None:
            self.masters.load_state_dict(state.get("master_params"), state.get("master_names"))
            if state.get("master_params") is None:
                log.info(
                    "amp state has no master weights (saved at %s); they start from the model weights",
                    state.get("opt_level", "O0"),
                )
