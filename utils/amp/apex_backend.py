"""The opt levels on NVIDIA apex (builds before 25.07, which still ship ``apex.amp``; CUDA, float16).

Only selected when ``apex.amp`` imports and the run is on CUDA (see policy.py).
"""

from __future__ import annotations

import contextlib
import importlib
import logging
from typing import Any, ContextManager, Dict, Optional, Tuple

import torch
from torch import nn

from utils.amp.loss_scale import unscale_and_check_
from utils.amp.outcome import ClipOptions, StepOutcome
from utils.amp.policy import AmpPolicy

log = logging.getLogger(__name__)


class ApexAmp:
    """``apex.amp.initialize`` / ``scale_loss`` / ``state_dict`` behind the framework's Amp interface."""

    def __init__(self, policy: AmpPolicy) -> None:
        self.policy = policy
        self.apex_amp = importlib.import_module("apex.amp")
        self.optimizer: Optional[torch.optim.Optimizer] = None
        self.skipped_steps = 0

    def initialize(
        self, model: nn.Module, optimizer: Optional[torch.optim.Optimizer] = None
    ) -> Tuple[nn.Module, Optional[torch.optim.Optimizer]]:
        kwargs: Dict[str, Any] = {"opt_level": self.policy.opt_level, "verbosity": 0}
        if self.policy.opt_level in ("O2", "O3"):
            kwargs["keep_batchnorm_fp32"] = self.policy.keep_batchnorm_fp32
        if self.policy.opt_level != "O0":
            kwargs["loss_scale"] = self.policy.loss_scale if self.policy.loss_scale is not None else 1.0
        if optimizer is None:
            model = self.apex_amp.initialize(model, **kwargs)
        else:
            model, optimizer = self.apex_amp.initialize(model, optimizer, **kwargs)
        self.optimizer = optimizer
        log.info(self.policy.describe())
        return model, optimizer

    def autocast(self) -> ContextManager:
        # apex O1 patches torch functions globally at initialize; O2/O3 cast in the patched forward.
        return contextlib.nullcontext()

    def uncast(self) -> ContextManager:
        return self.apex_amp.disable_casts() if self.policy.opt_level == "O1" else contextlib.nullcontext()

    def zero_grad(self, optimizer: torch.optim.Optimizer) -> None:
        optimizer.zero_grad()  # apex's: model gradients zeroed, its fp32 master gradients set to None

    def backward(self, loss: torch.Tensor) -> None:
        if self.optimizer is None:
            raise RuntimeError("amp.backward needs amp.initialize(model, optimizer) first")
        # Unscaling on every exit accumulates correctly into apex's fp32 master gradients.
        with self.apex_amp.scale_loss(loss, self.optimizer) as scaled:
            scaled.backward()

    def apply_step(
        self, optimizer: torch.optim.Optimizer, clip: ClipOptions = ClipOptions(), check_finite: bool = False
    ) -> StepOutcome:
        """apex decides on the host (it reads its overflow flag in ``scale_loss``); ``check_finite`` adds one read."""
        if check_finite:
            grads = [p.grad for p in self.apex_amp.master_params(optimizer) if p.grad is not None]
            if unscale_and_check_(grads).item() != 0:
                if getattr(getattr(optimizer, "_amp_stash", None), "already_patched", False):
                    optimizer.step()  # consumes apex's one-shot skip of this overflow
                return StepOutcome.decided(False)
        return StepOutcome.decided(self.step(optimizer, clip.norm, clip.value))

    def count_skipped(self, steps: int, where: str = "") -> None:
        self.skipped_steps += steps

    def step(
        self,
        optimizer: torch.optim.Optimizer,
        clip_grad_norm: Optional[float] = None,
        clip_grad_value: Optional[float] = None,
    ) -> bool:
        # On overflow apex replaces optimizer.step by a one-shot skip and marks the stash.
        stash = getattr(optimizer, "_amp_stash", None)
        skip = bool(getattr(stash, "already_patched", False))
        params = [p for p in self.apex_amp.master_params(optimizer) if p.grad is not None]
        if not skip:
            if clip_grad_norm is not None:
                torch.nn.utils.clip_grad_norm_(params, clip_grad_norm)
            if clip_grad_value is not None:
                torch.nn.utils.clip_grad_value_(params, clip_grad_value)
        optimizer.step()
        if skip:
            self.skipped_steps += 1
            log.info("gradient overflow: step skipped (%d so far)", self.skipped_steps)
        return not skip

    def state_dict(self) -> Dict[str, Any]:
        return {
            "opt_level": self.policy.opt_level,
            "skipped_steps": self.skipped_steps,
            "apex": self.apex_amp.state_dict(),
        }

    def load_state_dict(self, state: Dict[str, Any]) -> None:
        self.skipped_steps = state.get("skipped_steps", 0)
        if state.get("apex"):
            self.apex_amp.load_state_dict(state["apex"])
