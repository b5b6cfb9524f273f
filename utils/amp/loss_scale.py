"""Loss scaling for fp16: dynamic (GradScaler's rule) or static.

``torch.amp.GradScaler`` refuses fp16 gradients (O3 keeps its gradients in
fp16) and has no static mode, so the scale is kept here and the gradients are
unscaled with the same fused kernel GradScaler uses.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from typing import Any, Dict, Iterable, List, Optional, Union

import torch

log = logging.getLogger(__name__)


class LossScaler:
    """Multiplies the loss by ``scale``; divides the gradients by it and reports overflow.

    Dynamic: an overflow (inf/NaN gradient) multiplies the scale by
    ``backoff_factor``; ``growth_interval`` clean steps in a row multiply it by
    ``growth_factor``. Static: the scale never changes. In both, the caller
    skips the optimizer step on overflow.

    The scale and the count of clean steps are tensors on the gradients' device,
    updated there by GradScaler's kernel: a training step reads neither.
    """

    def __init__(
        self,
        init_scale: float = 2.0**16,
        dynamic: bool = True,
        growth_factor: float = 2.0,
        backoff_factor: float = 0.5,
        growth_interval: int = 2000,
    ) -> None:
        self._scale = torch.full((), float(init_scale), dtype=torch.float32)
        self._clean = torch.zeros((), dtype=torch.int32)  # clean steps in a row (GradScaler's growth tracker)
        self.dynamic = dynamic
        self.growth_factor = growth_factor
        self.backoff_factor = backoff_factor
        self.growth_interval = growth_interval

    @classmethod
    def from_setting(cls, setting: Union[str, float]) -> "LossScaler":
        """``"dynamic"`` or a static float (the resolved ``amp.loss_scale``)."""
        return cls() if setting == "dynamic" else cls(init_scale=float(setting), dynamic=False)

    @property
    def scale(self) -> float:
        """The current scale (a host read: for logs and checkpoints, not for every step)."""
        return self._scale.item()

    @property
    def clean_steps(self) -> int:
        return int(self._clean.item())

    def _on(self, device: torch.device) -> torch.Tensor:
        if self._scale.device != device:
            self._scale, self._clean = self._scale.to(device), self._clean.to(device)
        return self._scale

    def scale_loss(self, loss: torch.Tensor) -> torch.Tensor:
        return loss * self._on(loss.device)  # a 0-dim fp32 factor: an fp16 loss is scaled in fp32

    @torch.no_grad()
    def check_and_unscale_(self, grads: Iterable[torch.Tensor]) -> torch.Tensor:
        """Divide ``grads`` in place by the scale; a 0-dim flag on the device, 1.0 when any of them is not finite."""
        return unscale_and_check_(grads, self._scale)

    def unscale_(self, grads: Iterable[torch.Tensor]) -> bool:
        """``check_and_unscale_``, read: True when all of them are finite."""
        return self.check_and_unscale_(grads).item() == 0

    def update(self, finite: bool) -> None:
        """Adjust a dynamic scale after a step (taken when ``finite``, skipped otherwise)."""
        self.update_from(torch.tensor(0.0 if finite else 1.0, device=self._scale.device))

    def update_from(self, found_inf: torch.Tensor) -> None:
        """``update`` with the overflow flag still on the device (no read)."""
        if self.dynamic:
            scale = self._on(found_inf.device)
            torch._amp_update_scale_(
                scale, self._clean, found_inf.float(), self.growth_factor, self.backoff_factor, self.growth_interval
            )

    def state_dict(self) -> Dict[str, Any]:
        return {"scale": self.scale, "dynamic": self.dynamic, "clean_steps": self.clean_steps}

    def load_state_dict(self, state: Dict[str, Any]) -> None:
        """A dynamic scale continues where it was; a static one keeps the configured value."""
        if self.dynamic and state.get("dynamic", True):
            self._scale.fill_(float(state["scale"]))
            self._clean.fill_(int(state.get("clean_steps", 0)))


@torch.no_grad()
def unscale_and_check_(grads: Iterable[torch.Tensor], scale: Optional[torch.Tensor] = None) -> torch.Tensor:
    """Divide ``grads`` in place by ``scale`` (None: only check them) with GradScaler's fused kernel;
    a 0-dim float flag on their device, 1.0 when any of them holds an inf or NaN."""
    groups: Dict[Any, List[torch.Tensor]] = defaultdict(list)
    for grad in grads:
        groups[(grad.device, grad.dtype)].append(grad)
    flags = []
    for (device, _), tensors in groups.items():
        found_inf = torch.zeros((), device=device)
        inv_scale = torch.ones((), device=device) if scale is None else scale.to(device).double().reciprocal().float()
        torch._amp_foreach_non_finite_check_and_unscale_(tensors, found_inf, inv_scale)
        flags.append(found_inf)
    if not flags:
        return torch.zeros(())
    return flags[0] if len(flags) == 1 else torch.stack([f.to(flags[0].device) for f in flags]).amax()
