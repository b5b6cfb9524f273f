"""What an opt level means on a given device: dtype, casting, master weights, loss scaling, backend.

The rules are the opt-level table in docs/mixed-precision.md; everything the backends do
follows from the ``AmpPolicy`` resolved here, once, from the config.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Optional, Union

import torch

from utils.config.schema import AmpConfig
from utils.distributed.device import need_cuda
from utils.errors import ConfigError

_DTYPES = {"float16": torch.float16, "bfloat16": torch.bfloat16}


@dataclass(frozen=True)
class AmpPolicy:
    """The resolved precision policy of a run."""

    opt_level: str
    backend: str  # native | apex
    device_type: str  # cpu | cuda | ...
    dtype: torch.dtype  # the low-precision dtype; float32 at O0
    loss_scale: Optional[Union[str, float]]  # None | "dynamic" | a static float
    keep_batchnorm_fp32: bool
    cast_by_wrapper: bool = (
        False  # dist.mode=fsdp: its MixedPrecisionPolicy casts the weights, the sharded fp32 ones are the masters
    )

    @property
    def autocast(self) -> bool:
        """O1: fp32 weights, per-op casting by torch.autocast."""
        return self.opt_level == "O1"

    @property
    def cast_model(self) -> bool:
        """O2 and O3: the weights themselves are low precision."""
        return self.opt_level in ("O2", "O3") and not self.cast_by_wrapper

    @property
    def master_weights(self) -> bool:
        """O2: the optimizer steps on fp32 copies of the low-precision weights."""
        return self.opt_level == "O2" and not self.cast_by_wrapper

    def describe(self) -> str:
        if self.opt_level == "O0":
            return f"amp O0 ({self.backend}): fp32"
        if self.cast_by_wrapper and self.opt_level != "O1":
            return f"amp {self.opt_level} (fsdp MixedPrecisionPolicy): {str(self.dtype).replace('torch.', '')} weights in forward and backward, BatchNorm fp32, fp32 sharded weights stepped"
        # type: ignore[arg-type]
        scaling = {None: "no loss scaling", "dynamic": "dynamic loss scaling"}.get(
            self.loss_scale, f"static loss scale {self.loss_scale}"
        )
        bn = ", BatchNorm fp32" if self.cast_model and self.keep_batchnorm_fp32 else ""
        masters = ", fp32 master weights" if self.master_weights else ""
        return f"amp {self.opt_level} ({self.backend}): {str(self.dtype).replace('torch.', '')}{bn}{masters}, {scaling}"


def apex_amp_available() -> bool:
    """True when an apex build that still has ``apex.amp`` (apex < 25.07) is importable."""
    try:
        importlib.import_module("apex.amp")
    except Exception:  # ImportError, or a broken/unrelated 'apex' package failing on import
        return False
    return True


def _backend(cfg: AmpConfig, device: torch.device, dtype: torch.dtype) -> str:
    if cfg.backend == "native":
        return "native"
    usable = apex_amp_available() and device.type == "cuda" and dtype != torch.bfloat16
    if cfg.backend == "auto":
        return "apex" if usable else "native"
    if not apex_amp_available():
        raise ConfigError(
            "amp.backend=apex: 'apex.amp' is not importable; NVIDIA removed apex.amp in apex 25.07 "
            "(apex >= 25.07 has no amp), so the opt levels run on native torch.amp here: use amp.backend=native (or auto)"
        )
    need_cuda("amp.backend=apex", device, "apex amp is CUDA-only: use amp.backend=native")
    if dtype == torch.bfloat16:
        raise ConfigError(
            "amp.backend=apex supports float16 only; use amp.dtype=float16, or amp.backend=native for bfloat16"
        )
    return "apex"


def _loss_scale(cfg: AmpConfig, opt_level: str, dtype: torch.dtype) -> Optional[Union[str, float]]:
    if opt_level == "O0":
        return None
    if cfg.loss_scale == "auto":
        # fp16 gradients underflow without scaling; bf16 has fp32's range; O3 is apex's "no scaling" baseline.
        return "dynamic" if dtype == torch.float16 and opt_level in ("O1", "O2") else None
    if cfg.loss_scale == "dynamic":
        return "dynamic"
    return float(cfg.loss_scale)  # a finite number > 0: checked with the config


def resolve_policy(cfg: AmpConfig, device: torch.device, cast_by_wrapper: bool = False) -> AmpPolicy:
    """The policy of ``cfg`` on ``device``; a ``ConfigError`` names any impossible combination.
    ``cast_by_wrapper``: the model's wrapper (FSDP) casts the weights, amp leaves them as they are."""
    level = cfg.opt_level
    if level == "O0":
        dtype = torch.float32
    elif cfg.dtype == "auto":
        dtype = torch.float16 if device.type == "cuda" else torch.bfloat16
    else:
        dtype = _DTYPES[cfg.dtype]
    if level == "O1" and cfg.keep_batchnorm_fp32 is not None:
        raise ConfigError(
            "amp.keep_batchnorm_fp32 applies to O2 and O3 only (at O1 all weights stay fp32); remove it or set amp.keep_batchnorm_fp32=null"
        )
    keep_bn = cfg.keep_batchnorm_fp32 if cfg.keep_batchnorm_fp32 is not None else level != "O3"
    return AmpPolicy(
        opt_level=level,
        backend=_backend(cfg, device, dtype),
        device_type=device.type,
        dtype=dtype,
        loss_scale=_loss_scale(cfg, level, dtype),
        keep_batchnorm_fp32=keep_bn,
        cast_by_wrapper=cast_by_wrapper,
    )
