"""DDP's "parameters that received no gradient" error, as one line naming them and the fix.

With ``find_unused_parameters=False`` (the default: it saves a graph walk per step)
DDP waits in every backward for a gradient of each parameter it reduces; one that
no loss depends on stalls the reduction, and the next forward raises a RuntimeError
that names neither the parameters (only their indices) nor the config key.
"""

from __future__ import annotations

import re
from typing import List, Tuple

from torch import nn

from utils.errors import ConfigError

_SIGNATURE = "Expected to have finished reduction in the prior iteration"
_INDICES = re.compile(r"Parameter indices which did not receive grad for rank (\d+): ([\d ]+)")
# with TORCH_DISTRIBUTED_DEBUG=INFO/DETAIL
_NAMES = re.compile(r"Parameters which did not receive grad for rank (\d+): (.+)")
SHOWN = 10  # names in the line; a whole unused branch can hold hundreds


def reduced_parameter_names(ddp: nn.parallel.DistributedDataParallel) -> List[str]:
    """The names of the parameters DDP reduces, in its reducer's order (the indices its errors give).

    The order is DDP's ``_build_params_for_reducer``: modules in ``named_modules`` order,
    each one's own parameters that require a gradient and are not ignored, shared ones once.
    """
    ignored = getattr(ddp, "parameters_to_ignore", set())
    names, seen = [], set()
    for module_name, module in ddp.module.named_modules():
        for name, param in module.named_parameters(recurse=False):
            if param.requires_grad and f"{module_name}.{name}" not in ignored and param not in seen:
                seen.add(param)
                names.append(f"{module_name}.{name}" if module_name else name)
    return names


def _unused(message: str, model: nn.Module) -> Tuple[str, List[str]]:
    """The rank and the parameters torch's message lists: its indices, named through ``model``
    (its names appear only with TORCH_DISTRIBUTED_DEBUG set)."""
    by_index = _INDICES.search(message)
    if by_index:
        names = reduced_parameter_names(model) if isinstance(model, nn.parallel.DistributedDataParallel) else []
        indices = [int(i) for i in by_index.group(2).split()]
        return by_index.group(1), [names[i] if i < len(names) else f"#{i}" for i in indices]
    by_name = _NAMES.search(message)
    if by_name:
        return by_name.group(1), [name.strip() for name in by_name.group(2).split(",") if name.strip()]
    return "?", []


def unused_parameters_error(err: BaseException, model: nn.Module) -> BaseException:
    """A :class:`ConfigError` naming the parameters that got no gradient under DDP and the fix,
    when ``err`` is DDP's error about them; ``err`` itself otherwise."""
    message = str(err)
    if not isinstance(err, RuntimeError) or _SIGNATURE not in message:
        return err
    rank, names = _unused(message, model)
    listed = ", ".join(names[:SHOWN]) + (f", ... ({len(names)} in all)" if len(names) > SHOWN else "")
    what = f"parameter(s) {listed}" if names else "some parameters"
    return ConfigError(
        f"{what} of the network received no gradient on rank {rank}: no loss depends on them, and DDP waits for every parameter's gradient; "
        "set dist.find_unused_parameters=true, or use them in the loss, or freeze them (model.freeze)"
    )
