"""Data parallelism: SyncBN conversion and the DDP / apex DDP / DataParallel wrappers.

``dist.mode`` picks the wrapper: ``ddp`` (torch DistributedDataParallel, one
process per device), ``apex`` (apex.parallel's DDP, only where that package
still imports: apex removed it in 25.07), ``dp`` (nn.DataParallel: one process
driving every visible GPU), ``fsdp`` (sharded, see ``fsdp.py``: applied before
the optimizer is built, so this module leaves it as it is).
"""

from __future__ import annotations

import importlib
import logging
from types import ModuleType

import torch
from torch import nn

from utils.config.schema import DistConfig
from utils.distributed.process_group import DistInfo
from utils.distributed.sync_bn import CPUSyncBatchNorm, convert_batchnorm
from utils.errors import ConfigError

log = logging.getLogger(__name__)


def apex_parallel() -> ModuleType:
    """``apex.parallel``, or a ValueError naming the fix."""
    try:
        return importlib.import_module("apex.parallel")
    except ImportError as err:
        raise ConfigError(
            f"dist.mode=apex needs NVIDIA apex with apex.parallel (removed in apex 25.07; not importable here: {err}); "
            "use dist.mode=ddp, which does the same with torch's DistributedDataParallel"
        ) from err


def convert_sync_bn(model: nn.Module, mode: str, device: torch.device) -> nn.Module:
    """Every BatchNorm becomes a synchronized one: ``nn.SyncBatchNorm`` on CUDA (apex's with
    dist.mode=apex), :class:`CPUSyncBatchNorm` elsewhere (nn.SyncBatchNorm refuses CPU tensors)."""
    if mode == "dp":
        raise ConfigError(
            "model.sync_bn needs one process per device, but dist.mode=dp runs one process; launch with torchrun and dist.mode=ddp"
        )
    if device.type == "cuda" and mode == "apex":
        model = apex_parallel().convert_syncbn_model(model)
        kind = "apex.parallel.SyncBatchNorm"
    elif device.type == "cuda":
        model = convert_batchnorm(model, nn.SyncBatchNorm)
        kind = "nn.SyncBatchNorm"
    else:
        model = convert_batchnorm(model, CPUSyncBatchNorm)
        kind = "CPUSyncBatchNorm"
    count = sum(isinstance(m, nn.modules.batchnorm._BatchNorm) for m in model.modules())
    log.info("sync_bn: %d BatchNorm layer(s) now %s", count, kind)
    return model.to(device)


def wrap_model(model: nn.Module, cfg: DistConfig, info: DistInfo) -> nn.Module:
    """The (amp-initialized) model in the wrapper ``cfg.mode`` asks for; unchanged in a
    single process without several GPUs."""
    if cfg.mode == "dp":
        if info.distributed:
            raise ConfigError(
                "dist.mode=dp drives all GPUs from one process; start it with plain `python main.py`, or use dist.mode=ddp under torchrun"
            )
        if info.device.type == "cuda" and torch.cuda.device_count() > 1:
            log.info("DataParallel over %d GPUs", torch.cuda.device_count())
            return nn.DataParallel(model)
        log.info("dist.mode=dp with fewer than 2 GPUs: running on %s alone", info.device)
        return model
    if not info.distributed or cfg.mode == "fsdp":  # fsdp: sharded before the optimizer was built (fsdp.py)
        return model
    if cfg.mode == "apex":
        # apex's DDP has no find_unused_parameters / static_graph; it reduces gradients after backward.
        return apex_parallel().DistributedDataParallel(model)
    device_ids = [info.device.index] if info.device.type == "cuda" else None
    # Gradients as views into DDP's communication buckets: no copy between the two, and
    # one set of gradient memory less. bucket_cap_mb trades overlap for fewer all-reduces.
    return nn.parallel.DistributedDataParallel(
        model,
        device_ids=device_ids,
        find_unused_parameters=cfg.find_unused_parameters,
        static_graph=cfg.static_graph,
        gradient_as_bucket_view=cfg.gradient_as_bucket_view,
        bucket_cap_mb=cfg.bucket_cap_mb,
    )


def unwrap(model: torch.nn.Module) -> torch.nn.Module:
    """The network inside DDP / DataParallel wrappers (and a ``torch.compile`` wrapper, whose
    state_dict keys carry ``_orig_mod.``; ``train.compile`` compiles in place and has none)."""
    wrappers = (torch.nn.parallel.DistributedDataParallel, torch.nn.DataParallel)
    while True:
        if isinstance(model, wrappers) or type(model).__module__.startswith("apex."):
            model = model.module
        elif type(model).__name__ == "OptimizedModule" and hasattr(model, "_orig_mod"):
            model = model._orig_mod
        else:
            return model


def without_ddp(model: nn.Module) -> nn.Module:
    """The module inside a DDP wrapper (DataParallel is kept). Evaluation runs on it:
    DDP's forward broadcasts buffers, a collective that a rank with an empty slice
    would never join."""
    while isinstance(model, nn.parallel.DistributedDataParallel) or type(model).__module__.startswith("apex.parallel"):
        model = model.module
    return model
