"""Gradient checkpointing: trade recomputation for activation memory."""

from __future__ import annotations

import contextlib
import functools
from typing import Any, Callable, Iterator, List, Tuple

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


def _in_backward() -> bool:
    # a forward that runs while autograd's engine executes a backward graph is a recomputation
    return torch._C._current_graph_task_id() != -1


def _keep_stats(module: nn.Module, args: Any) -> None:
    if torch.compiler.is_compiling() or not (module.training and _in_backward()):
        return  # compiled: the recomputation is part of the compiled backward, the stats updated once (in forward)
    if module.__dict__.get("_stats_kept_in") == torch._C._current_graph_task_id():
        return  # recomputed again in the same backward (a shared layer): the first values are the ones to restore
    module._stats_kept_in = torch._C._current_graph_task_id()
    saved = [(getattr(module, name), getattr(module, name).detach().clone()) for name in _STATS]

    def restore() -> None:
        with torch.no_grad():
            for buf, value in saved:
                buf.copy_(value)
        module.__dict__.pop("_stats_kept_in", None)

    # restored when this backward ends: the recomputation may stop inside the layer's forward (non-reentrant
    # checkpointing stops once it has what backward needs), where a forward hook would never run
    torch.autograd.Variable._execution_engine.queue_callback(restore)


def keep_running_stats_in_backward(module: nn.Module) -> List[torch.utils.hooks.RemovableHandle]:
    """A hook on every norm layer of ``module`` with running statistics: a forward that runs during
    backward (the recomputation of a checkpoint someone else placed, timm's ``set_grad_checkpointing``)
    leaves the statistics and ``num_batches_tracked`` as they were once that backward ends. Returns the
    hook handles.

    For checkpointing whose call takes no ``context_fn`` (``run_checkpointed`` passes
    ``frozen_running_stats``); a forward outside backward updates the statistics as usual.
    """
    return [
        m.register_forward_pre_hook(_keep_stats)
        for m in module.modules()
        if isinstance(m, _NormBase) and m.track_running_stats and m.running_mean is not None
    ]


def _contexts(module: nn.Module) -> Tuple[contextlib.AbstractContextManager, contextlib.AbstractContextManager]:
    # (forward context, recompute context): only the recomputation is kept from touching the stats.
    return contextlib.nullcontext(), frozen_running_stats(module)


def checkpointing(module: nn.Module, enabled: bool) -> bool:
    """Whether ``module``'s checkpointed blocks keep only their inputs now: ``enabled`` (its grad_checkpointing), in
    training, with autograd recording (evaluation and ``torch.no_grad`` run every block plainly)."""
    return enabled and module.training and torch.is_grad_enabled()


def run_checkpointed(module: nn.Module, x: torch.Tensor, enabled: bool) -> torch.Tensor:
    """``module(x)``, keeping only the input for backward when ``enabled`` and training.

    Non-reentrant checkpointing works with DDP (each parameter's gradient is
    produced once, so no "marked ready twice") and with inputs that do not
    require grad; the recomputation leaves norm running statistics alone, also
    under ``train.compile``.
    """
    if checkpointing(module, enabled):
        return checkpointed_call(module, module, x)
    return module(x)


def checkpointed_call(owner: nn.Module, fn: Callable[..., Any], *inputs: torch.Tensor) -> Any:
    """``fn(*inputs)`` checkpointed (only the inputs kept for backward), its recomputation leaving the
    running statistics of ``owner``'s norm layers alone: for a function of several tensors (MINet's AIM)."""
    if torch.compiler.is_compiling():
        # torch.compile takes no context_fn but its own: the recomputation is part of the compiled
        # backward graph, where the in-place updates of running statistics happen once (in forward)
        return checkpoint(fn, *inputs, use_reentrant=False)
    return checkpoint(fn, *inputs, use_reentrant=False, context_fn=functools.partial(_contexts, owner))
