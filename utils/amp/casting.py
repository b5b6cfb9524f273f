"""O2/O3 building blocks: cast a model's weights, cast at its entry and exit, fp32 master weights."""

from __future__ import annotations

import functools
from typing import Any, Dict, List, Optional, Set, Tuple

import torch
from torch import nn
from torch.nn.modules.batchnorm import _BatchNorm

from utils.errors import CheckpointError
from utils.tree import map_tensors


def cast_floats(obj: Any, dtype: torch.dtype) -> Any:
    """``obj`` with every floating tensor (also inside containers, ``utils/tree.py``) cast to ``dtype``."""
    return map_tensors(lambda t: t.to(dtype) if t.is_floating_point() else t, obj)


def _cast_inputs(dtype: torch.dtype, module: nn.Module, args: Tuple, kwargs: Dict) -> Tuple[Tuple, Dict]:
    return cast_floats(args, dtype), cast_floats(kwargs, dtype)


def _cast_outputs(module: nn.Module, args: Tuple, output: Any) -> Any:
    return cast_floats(output, torch.float32)


def add_cast_hooks(model: nn.Module, dtype: torch.dtype) -> List[Any]:
    """Floating inputs enter ``model`` as ``dtype``; floating outputs leave it as fp32 (as apex O2/O3 did).

    Hooks, not a wrapper module: the model object and its attribute names
    (``backbone``, ``head``, state_dict keys) stay what the user built.
    """
    pre = model.register_forward_pre_hook(functools.partial(_cast_inputs, dtype), with_kwargs=True)
    post = model.register_forward_hook(_cast_outputs)
    return [pre, post]


def low_precision_params(model: nn.Module, keep_batchnorm_fp32: bool) -> Set[nn.Parameter]:
    """The floating parameters that ``cast_model`` turns low precision."""
    return {
        p
        for module in _cast_modules(model, keep_batchnorm_fp32)
        for p in module.parameters(recurse=False)
        if p.is_floating_point()
    }


def _cast_modules(model: nn.Module, keep_batchnorm_fp32: bool) -> List[nn.Module]:
    return [m for m in model.modules() if not (keep_batchnorm_fp32 and isinstance(m, _BatchNorm))]


@torch.no_grad()
def cast_model(model: nn.Module, dtype: torch.dtype, keep_batchnorm_fp32: bool) -> None:
    """Cast floating parameters and buffers to ``dtype`` in place, BatchNorm left fp32 if asked.

    ``param.data`` is replaced, so every ``Parameter`` object (held by the
    optimizer, by DDP, by user code) stays the same object.
    """
    for module in _cast_modules(model, keep_batchnorm_fp32):
        for param in module.parameters(recurse=False):
            if param.is_floating_point():
                param.data = param.data.to(dtype)
        for name, buf in module.named_buffers(recurse=False):
            if buf is not None and buf.is_floating_point():
                module._buffers[name] = buf.to(dtype)


class MasterWeights:
    """fp32 copies of an optimizer's low-precision parameters; the optimizer steps on the copies.

    ``pairs`` holds (model parameter, master) in optimizer order. Parameters
    that stay fp32 (BatchNorm) are stepped on directly, as apex did.
    """

    def __init__(self, optimizer: torch.optim.Optimizer, low_precision: Set[nn.Parameter]) -> None:
        if optimizer.state:
            raise ValueError("amp.initialize must see a fresh optimizer: load optimizer state after amp.initialize")
        self.pairs: List[Tuple[nn.Parameter, torch.Tensor]] = []
        # the parameters' names, where the groups have them: a resume matches masters by name
        self.names: List[Optional[str]] = []
        for group in optimizer.param_groups:
            params = []
            for param, name in zip(group["params"], group.get("names") or [None] * len(group["params"])):
                if param in low_precision:
                    # Copied before the model is cast, so the masters start from the exact fp32 weights.
                    master = param.detach().clone().float().requires_grad_(param.requires_grad)
                    self.pairs.append((param, master))
                    self.names.append(name)
                    params.append(master)
                else:
                    params.append(param)
            group["params"] = params

    def grads_to_masters(self) -> None:
        """Move the model's (low-precision, possibly scaled) gradients into the masters as fp32."""
        for param, master in self.pairs:
            master.grad = None if param.grad is None else param.grad.float()
            param.grad = None

    @torch.no_grad()
    def masters_to_model(self) -> None:
        """The model's weights become the masters rounded to the low-precision dtype."""
        for param, master in self.pairs:
            param.copy_(master)

    def state_dict(self) -> List[torch.Tensor]:
        return [master.detach() for _, master in self.pairs]

    @torch.no_grad()
    def load_state_dict(
        self, masters: Optional[List[torch.Tensor]], names: Optional[List[Optional[str]]] = None
    ) -> None:
        """Restore saved masters; without them (a checkpoint of another level) start from the model weights.
        With the saved masters' ``names`` they are matched by name (the optimizer's grouping may have changed);
        a parameter without a saved master starts from its model weight."""
        if masters is None:
            for param, master in self.pairs:
                master.copy_(param)
            return
        if names is not None and None not in names and None not in self.names and list(names) != self.names:
            by_name = dict(zip(names, masters))
            for name, (param, master) in zip(self.names, self.pairs):
                master.copy_(by_name[name] if name in by_name else param)
            self.masters_to_model()
            return
        if len(masters) != len(self.pairs) or any(
            m.shape != master.shape for m, (_, master) in zip(masters, self.pairs)
        ):
            raise CheckpointError(
                f"amp state holds {len(masters)} master weights that do not match the {len(self.pairs)} of this optimizer; "
                "resume with the same model, optimizer groups and amp.opt_level"
            )
        for saved, (_, master) in zip(masters, self.pairs):
            master.copy_(saved)
        self.masters_to_model()
