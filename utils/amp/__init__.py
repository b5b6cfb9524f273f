"""Mixed precision behind apex's opt levels O0/O1/O2/O3 (the table in docs/mixed-precision.md).

The training loop only talks to ``Amp``::

    amp = Amp(cfg.amp, device)
    model, optimizer = amp.initialize(model, optimizer)
    with amp.autocast():
        loss = criterion(model(x), y)
    amp.backward(loss)
    taken = amp.step(optimizer, clip_grad_norm, clip_grad_value)  # False: overflow, step skipped
    outcome = amp.apply_step(optimizer, ClipOptions(norm), check_finite)  # the loop's form: no host read

The native backend implements every level with PyTorch; the apex backend is
used only where an apex with ``apex.amp`` (before 25.07) is installed and the
run is on CUDA.
"""

from __future__ import annotations

from typing import Any, ContextManager, Dict, Optional, Sequence, Tuple, Union

import torch
from torch import nn

from utils.amp.apex_backend import ApexAmp
from utils.amp.loss_scale import LossScaler
from utils.amp.native import NativeAmp
from utils.amp.outcome import ClipOptions, StepOutcome, StepResult
from utils.amp.policy import AmpPolicy, apex_amp_available, resolve_policy
from utils.config.schema import AmpConfig

__all__ = [
    "Amp",
    "AmpPolicy",
    "ClipOptions",
    "LossScaler",
    "StepOutcome",
    "StepResult",
    "apex_amp_available",
    "resolve_policy",
]


class Amp:
    """The precision of one run, selected by ``cfg.opt_level``; delegates to the chosen backend."""

    def __init__(
        self, cfg: AmpConfig, device: torch.device, cast_by_wrapper: bool = False, policy: Optional[AmpPolicy] = None
    ) -> None:
        """``policy``: one ``resolve_policy`` already made of the same arguments (main.py checks it before the run
        folder exists), used as it is."""
        self.policy = policy or resolve_policy(cfg, device, cast_by_wrapper)
        self.backend: Union[NativeAmp, ApexAmp] = (
            ApexAmp(self.policy) if self.policy.backend == "apex" else NativeAmp(self.policy)
        )

    def initialize(
        self, model: nn.Module, optimizer: Optional[torch.optim.Optimizer] = None
    ) -> Tuple[nn.Module, Optional[torch.optim.Optimizer]]:
        """Apply the opt level; call before DDP wrapping and before loading optimizer state."""
        return self.backend.initialize(model, optimizer)

    def autocast(self) -> ContextManager:
        """The context for forward and loss (torch.autocast at O1, a no-op otherwise)."""
        return self.backend.autocast()

    def uncast(self) -> ContextManager:
        """A context for what follows the forward (loss sums, metrics): the tensors as they are. apex O1
        patches torch's functions for the whole process and refuses to mix float64 with float32 there."""
        return self.backend.uncast()

    def zero_grad(self, optimizer: torch.optim.Optimizer) -> None:
        """Clear the gradients (set to None where the backend allows: apex's own zero_grad takes no arguments)."""
        self.backend.zero_grad(optimizer)

    def backward(self, loss: torch.Tensor) -> None:
        """``loss.backward()``, with the loss scaled when the level scales."""
        self.backend.backward(loss)

    def step(
        self,
        optimizer: torch.optim.Optimizer,
        clip_grad_norm: Optional[float] = None,
        clip_grad_value: Optional[float] = None,
    ) -> bool:
        """Unscale, clip, step; False when an overflow made it skip the step (reads the decision)."""
        outcome = self.apply_step(optimizer, ClipOptions(clip_grad_norm, clip_grad_value))
        if outcome.result is StepResult.ON_DEVICE:
            skipped = outcome.found_inf.item() != 0
            self.count_skipped(int(skipped))
            return not skipped
        return outcome.result is StepResult.TAKEN

    def apply_step(
        self, optimizer: torch.optim.Optimizer, clip: ClipOptions = ClipOptions(), check_finite: bool = False
    ) -> StepOutcome:
        """Unscale, clip, step, skipping the update where a gradient is not finite (overflow; any
        non-finite gradient with ``check_finite``); with a fused optimizer the device decides and
        the outcome's ``found_inf`` says, to be read later (see ``count_skipped``)."""
        return self.backend.apply_step(optimizer, clip, check_finite)

    def count_skipped(self, steps: int, where: str = "") -> None:
        """Count overflow-skipped steps the device decided on, once they are read."""
        self.backend.count_skipped(steps, where)

    def count_overflows(self, skipped: Sequence[Any]) -> None:
        """Steps the device skipped, read at a sync point (``StepRecord``s): under loss scaling, those
        without a non-finite loss were overflows, counted here."""
        overflows = [r for r in skipped if r.bad_loss is None] if self.scales_loss else []
        if overflows:
            self.count_skipped(len(overflows), f" {len(overflows)}x in steps {overflows[0].step}..{overflows[-1].step}")

    @property
    def scales_loss(self) -> bool:
        """Whether a loss scaler may skip steps for overflow."""
        return getattr(self.backend, "scaler", None) is not None or self.policy.backend == "apex"

    @property
    def skipped_steps(self) -> int:
        return self.backend.skipped_steps

    def state_dict(self) -> Dict[str, Any]:
        """Loss scale, skipped-step count and (O2) the fp32 master weights, for checkpoints."""
        return {"backend": self.policy.backend, **self.backend.state_dict()}

    def load_state_dict(self, state: Dict[str, Any]) -> None:
        """Restore a checkpoint's amp state (after ``initialize`` and after the model's weights)."""
        if state.get("backend", self.policy.backend) != self.policy.backend:
            # the other backend's scaler state does not transfer
            state = {"skipped_steps": state.get("skipped_steps", 0)}
        self.backend.load_state_dict(state)
