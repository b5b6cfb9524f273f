"""``dist.mode=fsdp``: the network sharded over the ranks with PyTorch's FSDP2 (``fully_shard``).

What is sharded: ``fully_shard`` is applied to each block of the network, then
to the network itself (the root), so each block's parameters, gradients and
optimizer state live 1/world_size per rank and are all-gathered only around
that block's forward and backward. The blocks, by default: each stage of
``backbone.stages`` (or each child of ``backbone`` when it has no stages), then
every other direct child of the network that holds parameters (``head``, a
decoder). A network names its own blocks with a method ``fsdp_blocks()``
returning a list of submodules.

Mixed precision: the opt levels map to a ``MixedPrecisionPolicy`` (the sharded
fp32 parameters are O2's master weights, the optimizer steps on them); every
BatchNorm gets its own fp32 policy first, since bf16/fp16 parameters with fp32
running statistics fail in ``batch_norm``.

Evaluation (``full_weights``): each rank gathers the whole network once and runs
its own, unpadded slice of the data without further collectives, so ranks with
fewer (or no) batches never leave the others waiting in an all-gather.
"""

from __future__ import annotations

import contextlib
import logging
from typing import Any, Iterator, List, Optional

import torch
from torch import nn
from torch.nn.modules.batchnorm import _BatchNorm

from utils.config.schema import Config
from utils.errors import ConfigError

log = logging.getLogger(__name__)


def fsdp_api() -> Any:
    """``torch.distributed.fsdp`` with ``fully_shard`` (torch >= 2.6), or a ConfigError naming the fix."""
    try:
        from torch.distributed import fsdp

        fsdp.fully_shard  # noqa: B018 - older torch has the module without FSDP2
    except (ImportError, AttributeError) as err:
        raise ConfigError(
            f"dist.mode=fsdp needs torch.distributed.fsdp.fully_shard (FSDP2, torch >= 2.6); this torch {torch.__version__} has none"
        ) from err
    return fsdp


def check_fsdp_combination(cfg: Config, amp_backend: str, loss_scale: Any) -> None:
    """One ConfigError line for each combination ``dist.mode=fsdp`` does not support (before anything is built)."""
    if cfg.dist.mode != "fsdp":
        return
    refused = [
        (
            cfg.train.ema is not None,
            "train.ema with dist.mode=fsdp: the average would copy the sharded weights; use dist.mode=ddp or remove train.ema",
        ),
        (
            cfg.train.compile not in (None, False),
            "train.compile with dist.mode=fsdp is not supported here; turn train.compile off or use dist.mode=ddp",
        ),
        (
            amp_backend == "apex",
            "amp.backend=apex with dist.mode=fsdp: FSDP casts through its MixedPrecisionPolicy; use amp.backend=native",
        ),
        (
            loss_scale is not None,
            "amp loss scaling with dist.mode=fsdp: each rank sees only its gradient shard, so an overflow check would differ per rank; use amp.dtype=bfloat16 (no scaling) or dist.mode=ddp",
        ),
        (
            cfg.train.nonfinite == "skip",
            "train.nonfinite=skip with dist.mode=fsdp: each rank checks only its gradient shard; use train.nonfinite=stop or dist.mode=ddp",
        ),
        (
            cfg.train.async_checkpoint,
            "train.async_checkpoint with dist.mode=fsdp: sharded checkpoints are written by every rank while it waits; set train.async_checkpoint=false",
        ),
        (
            cfg.model.grad_checkpointing,
            "model.grad_checkpointing with dist.mode=fsdp is not tested here; turn it off or use dist.mode=ddp",
        ),
    ]
    for bad, message in refused:
        if bad:
            raise ConfigError(message)


def is_sharded(model: nn.Module) -> bool:
    """Whether ``model`` is (inside) an FSDP2 root."""
    try:
        from torch.distributed.fsdp import FSDPModule
    except ImportError:
        return False
    return isinstance(model, FSDPModule)


def fsdp_blocks(model: nn.Module) -> List[nn.Module]:
    """The submodules sharded as units: ``model.fsdp_blocks()`` when the network defines it, else the default
    (each backbone stage or child, then every other direct child with parameters)."""
    named = getattr(model, "fsdp_blocks", None)
    if callable(named):
        blocks = list(named())
        if not all(isinstance(b, nn.Module) for b in blocks):
            raise ConfigError(f"{type(model).__name__}.fsdp_blocks() must return a list of submodules, got {blocks!r}")
        return blocks
    blocks: List[nn.Module] = []
    for name, child in model.named_children():
        if name == "backbone":
            stages = getattr(child, "stages", None)
            parts = list(stages) if isinstance(stages, nn.ModuleList) and len(stages) else list(child.children())
            blocks.extend(p for p in parts if any(True for _ in p.parameters()))
        elif any(True for _ in child.parameters()):
            blocks.append(child)
    return blocks


def _policies(amp_policy: Any) -> tuple:
    """(the blocks' policy, BatchNorm's policy) for an opt level, or (None, None) at O0/O1 (fp32 weights)."""
    fsdp = fsdp_api()
    if amp_policy is None or not amp_policy.cast_by_wrapper or amp_policy.opt_level in ("O0", "O1"):
        return None, None
    low = amp_policy.dtype
    reduce = torch.float32 if amp_policy.opt_level == "O2" else low  # O3: everything low precision
    main = fsdp.MixedPrecisionPolicy(
        param_dtype=low, reduce_dtype=reduce, output_dtype=torch.float32, cast_forward_inputs=True
    )
    bn = fsdp.MixedPrecisionPolicy(
        param_dtype=torch.float32, reduce_dtype=torch.float32, output_dtype=low, cast_forward_inputs=True
    )
    return main, bn


def shard_model(
    model: nn.Module, cfg: Config, amp_policy: Any, distributed: bool, mesh: Optional[Any] = None
) -> nn.Module:
    """``model`` (on its device, SyncBN converted, frozen parts marked) sharded in place: BatchNorm layers
    (own fp32 policy when the weights are low precision), the blocks, then the root."""
    if cfg.dist.mode != "fsdp":
        return model
    fsdp = fsdp_api()
    if not distributed:
        log.info(
            "dist.mode=fsdp in one process: nothing to shard, the network runs whole (checkpoints stay sharded directories)"
        )
        return model
    main_policy, bn_policy = _policies(amp_policy)
    reshard = cfg.dist.reshard_after_forward
    common = {"mesh": mesh} if mesh is not None else {}
    if bn_policy is not None:
        for module in model.modules():
            if isinstance(module, _BatchNorm) and any(True for _ in module.parameters(recurse=False)):
                fsdp.fully_shard(module, mp_policy=bn_policy, reshard_after_forward=reshard, **common)
    blocks = fsdp_blocks(model)
    extra = {"mp_policy": main_policy} if main_policy is not None else {}
    for block in blocks:
        fsdp.fully_shard(block, reshard_after_forward=reshard, **extra, **common)
    fsdp.fully_shard(model, reshard_after_forward=reshard, **extra, **common)
    remember_reshard(model, reshard)
    log.info(
        "dist.mode=fsdp: %d block(s) and the root sharded (reshard_after_forward=%s%s)",
        len(blocks),
        reshard,
        f", {amp_policy.opt_level} as MixedPrecisionPolicy, BatchNorm fp32" if main_policy is not None else "",
    )
    return model


def _fsdp_modules(model: nn.Module) -> List[nn.Module]:
    from torch.distributed.fsdp import FSDPModule

    return [m for m in model.modules() if isinstance(m, FSDPModule)]


@contextlib.contextmanager
def full_weights(model: nn.Module) -> Iterator[None]:
    """Inside: every FSDP module of ``model`` holds its whole parameters, gathered once on every rank (a
    collective: every rank enters), and forwards run without collectives; resharded on leaving."""
    if not is_sharded(model):
        yield
        return
    modules = _fsdp_modules(model)
    for module in modules:
        module.set_reshard_after_forward(False, recurse=False)
        module.unshard()
    try:
        yield
    finally:
        for module in modules:
            module.reshard()
            module.set_reshard_after_forward(_reshard_setting(module), recurse=False)


def _reshard_setting(module: nn.Module) -> bool:
    return bool(getattr(module, "_fsdp_reshard_after_forward", True))


def remember_reshard(model: nn.Module, reshard: bool) -> None:
    """Keep the configured ``reshard_after_forward`` (the root's own is False, FSDP's choice) for ``full_weights``."""
    for module in _fsdp_modules(model):
        module._fsdp_reshard_after_forward = reshard if module is not model else False


@contextlib.contextmanager
def gradient_sync_off(model: nn.Module) -> Iterator[None]:
    """Backward passes inside keep their gradients local (accumulation): DDP's ``no_sync``, FSDP's
    ``set_requires_gradient_sync(False)``; nothing for a model without either."""
    if is_sharded(model):
        model.set_requires_gradient_sync(False)
        try:
            yield
        finally:
            model.set_requires_gradient_sync(True)
    elif hasattr(model, "no_sync"):
        with model.no_sync():
            yield
    else:
        yield
