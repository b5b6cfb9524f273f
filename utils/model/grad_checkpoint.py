"""Gradient checkpointing: trade recomputation for activation memory."""

from __future__ import annotations

import contextlib
import functools
from typing import Iterator, List, Tuple

import torch
from torch import nn
from torch.nn.modules.batchnorm import _NormBase
from torch.utils.checkpoint import checkpoint

_STATS = ("running_mean", "running_var", "num_batches_tracked")


@contextlib.contextmanager
def frozen_running_stats(module: nn.Module) -> Iterator[None]:
    """Run the block inside without changing any norm layer's running statistics.

    The recomputation in backward runs the forward a second time; BatchNorm in
    training mode would update ``running_mean``/``running_var`` (and count
    ``num_batches_tracked``) again, so the statistics would drift from those of
    an un-checkpointed network. The values are saved on entry and written back
    on exit (also when the recomputation stops early), which covers every
    ``_NormBase`` (BatchNorm*, SyncBatchNorm, InstanceNorm with running stats).
    """
    saved: List[Tuple[torch.Tensor, torch.Tensor]] = []
    for m in module.modules():
        if isinstance(m, _NormBase) and m.track_running_stats:
            for name in _STATS:
                buf = getattr(m, name, None)
                if isinstance(buf, torch.Tensor):
                    saved.append((buf, buf.detach().clone()))
    try:
        yield
    finally:
        with torch.no_grad():
            for buf, value in saved:
                buf.copy_(value)


def _contexts(module: nn.Module) -> Tuple[contextlib.AbstractContextManager, contextlib.AbstractContextManager]:
    # (forward context, recompute context): only the recomputation is kept from touching the stats.
    return contextlib.nullcontext(), frozen_running_stats(module)


def run_checkpointed(module: nn.Module, x: torch.Tensor, enabled: bool) -> torch.Tensor:
    """``module(x)``, keeping only the input for backward when ``enabled`` and training.

    Non-reentrant checkpointing works with DDP (each parameter's gradient is
    produced once, so no "marked ready twice") and with inputs that do not
    require grad; the recomputation leaves norm running statistics alone, also
    under ``train.compile``.
    """
    if enabled and module.training and torch.is_grad_enabled():
        if torch.compiler.is_compiling():
            # torch.compile takes no context_fn but its own: the recomputation is part of the compiled
            # backward graph, where the in-place updates of running statistics happen once (in forward)
            return checkpoint(module, x, use_reentrant=False)
        return checkpoint(module, x, use_reentrant=False, context_fn=functools.partial(_contexts, module))
    return module(x)
