"""How the optimizer steps (``optim.impl``): fused kernels, foreach (multi-tensor) kernels, or a loop per tensor.

All three compute the same update (within floating-point rounding) and save
the same ``state_dict``, so a checkpoint loads across them. Fused optimizers
also take GradScaler's ``found_inf`` flag and skip the update on the device,
which lets a step that may be skipped (loss scaling, ``train.nonfinite=skip``)
run without the host reading the flag.
"""

from __future__ import annotations

import importlib
import logging
from typing import Any, Dict, Iterable

import torch

from utils.errors import ConfigError

log = logging.getLogger(__name__)


def fused_devices() -> Iterable[str]:
    """Device types with fused optimizer kernels in this torch (cuda, cpu, ... since torch 2.4)."""
    probe = getattr(importlib.import_module("torch.optim.optimizer"), "_get_fused_kernels_supported_devices", None)
    return probe() if probe is not None else ("cuda",)


def fused_supported(params: Iterable[torch.Tensor]) -> bool:
    """Whether torch's fused kernels take every one of ``params`` (their device and a floating dtype)."""
    devices = set(fused_devices())
    params = list(params)
    if any(type(p).__name__ == "DTensor" or type(getattr(p, "data", None)).__name__ == "DTensor" for p in params):
        return False  # dist.mode=fsdp: torch's DTensor has no sharding rule for every fused kernel (fused SGD in 2.14)
    return all(p.device.type in devices and p.is_floating_point() for p in params)


def resolve_impl(impl: str, params: Iterable[torch.Tensor]) -> str:
    """``auto``: ``fused`` where torch supports it for the parameters' device and dtype, else ``foreach``."""
    params = list(params)
    if impl == "fused" and not fused_supported(params):
        kinds = sorted({f"{p.device.type}/{str(p.dtype).replace('torch.', '')}" for p in params})
        raise ConfigError(
            f"optim.impl=fused: torch {torch.__version__} has no fused optimizer kernels for {', '.join(kinds)}; use optim.impl=auto, foreach or loop"
        )
    if impl == "auto":
        return "fused" if fused_supported(params) else "foreach"
    return impl


def impl_options(impl: str) -> Dict[str, Any]:
    """The optimizer constructor's arguments that select ``impl`` (a resolved one)."""
    return {
        "fused": {"fused": True, "foreach": None},
        "foreach": {"fused": None, "foreach": True},
        "loop": {"fused": None, "foreach": False},
    }[impl]


def keep_impl(optimizer: torch.optim.Optimizer, impl: str) -> None:
    """Loading a state_dict saved by another implementation keeps this one (the groups carry the flags)."""
    options = impl_options(impl)

    def restore(opt: torch.optim.Optimizer) -> None:
        for group in opt.param_groups:
            group.update(options)

    optimizer.register_load_state_dict_post_hook(restore)


def takes_found_inf(optimizer: torch.optim.Optimizer) -> bool:
    """Whether ``optimizer.step()`` skips its update on the device when given GradScaler's ``found_inf``."""
    return bool(getattr(optimizer, "_step_supports_amp_scaling", False))


@torch.no_grad()
def step_unless(optimizer: torch.optim.Optimizer, found_inf: torch.Tensor) -> None:
    """``optimizer.step()``, applied on the device only where ``found_inf`` (0-dim, on the parameters' device) is 0."""
    if isinstance(optimizer, torch.optim.SGD):
        _zero_momentum(optimizer)
    optimizer.grad_scale, optimizer.found_inf = None, found_inf.float()
    try:
        optimizer.step()
    finally:
        del optimizer.grad_scale, optimizer.found_inf


def _zero_momentum(optimizer: torch.optim.SGD) -> None:
    # Fused SGD's first step makes its momentum buffers with torch.empty and fills them only when
    # the step is applied: a skipped first step would leave garbage. With dampening 0, a zero
    # buffer gives the first step's update exactly (buf = 0 * momentum + grad).
    for group in optimizer.param_groups:
        if group["momentum"] == 0 or group["dampening"] != 0:
            continue
        for p in group["params"]:
            state = optimizer.state[p]
            if state.get("momentum_buffer") is None and p.grad is not None:
                state["momentum_buffer"] = torch.zeros_like(p.grad)
