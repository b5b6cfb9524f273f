"""Loss scaling for fp16: dynamic (GradScaler's rule) or static.

``torch.amp.GradScaler`` refuses fp16 gradients (O3 keeps its gradients in
fp16) and has no static mode, so the scale is kept here and the gradients are
unscaled with the same fused kernel GradScaler uses.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from typing import Any, Dict, Iterable, List, Union

import torch

log = logging.getLogger(__name__)


class LossScaler:
    """Multiplies the loss by ``scale``; divides the gradients by it and reports overflow.

    Dynamic: an overflow (inf/NaN gradient) multiplies the scale by
    ``backoff_factor``; ``growth_interval`` clean steps in a row multiply it by
    ``growth_factor``. Static: the scale never changes. In both, the caller
    skips the optimizer step on overflow.
    """

    def __init__(
        self,
        init_scale: float = 2.0**16,
        dynamic: bool = True,
        growth_factor: float = 2.0,
        backoff_factor: float = 0.5,
        growth_interval: int = 2000,
    ) -> None:
        self.scale = float(init_scale)
        self.dynamic = dynamic
        self.growth_factor = growth_factor
        self.backoff_factor = backoff_factor
        self.growth_interval = growth_interval
        self.clean_steps = 0

    @classmethod
    def from_setting(cls, setting: Union[str, float]) -> "LossScaler":
        """``"dynamic"`` or a static float (the resolved ``amp.loss_scale``)."""
        return cls() if setting == "dynamic" else cls(init_scale=float(setting), dynamic=False)

    def scale_loss(self, loss: torch.Tensor) -> torch.Tensor:
        return loss * self.scale

    @torch.no_grad()
    def unscale_(self, grads: Iterable[torch.Tensor]) -> bool:
        """Divide ``grads`` in place by the scale; True when all of them are finite."""
        groups: Dict[Any, List[torch.Tensor]] = defaultdict(list)
        for grad in grads:
            groups[(grad.device, grad.dtype)].append(grad)
        finite = True
        for (device, _), tensors in groups.items():
            found_inf = torch.zeros(1, device=device)
            inv_scale = torch.full((1,), 1.0 / self.scale, device=device)
            torch._amp_foreach_non_finite_check_and_unscale_(tensors, found_inf, inv_scale)
            finite = finite and found_inf.item() == 0
        return finite

    def update(self, finite: bool) -> None:
        """Adjust a dynamic scale after a step (taken when ``finite``, skipped otherwise)."""
        if not self.dynamic:
            return
        if not finite:
            self.scale *= self.backoff_factor
            self.clean_steps = 0
            return
        self.clean_steps += 1
        if self.clean_steps == self.growth_interval:
            self.scale *= self.growth_factor
            self.clean_steps = 0

    def state_dict(self) -> Dict[str, Any]:
        return {"scale": self.scale, "dynamic": self.dynamic, "clean_steps": self.clean_steps}

    def load_state_dict(self, state: Dict[str, Any]) -> None:
        """A dynamic scale continues where it was; a static one keeps the configured value."""
        if self.dynamic and state.get("dynamic", True):
            self.scale = float(state["scale"])
            self.clean_steps = int(state.get("clean_steps", 0))
