"""What a network may return, and what a loss must: the contracts, checked with a message that names the user's code.

A network returns, for every task:

- a tensor: the prediction (class scores ``[B, C]``, a saliency map ``[B, 1, H, W]``, ...);
- a tuple or list: its first entry is the prediction, the others are auxiliary outputs
  (deep supervision, an auxiliary head);
- a dict: the entry ``model.prediction_key`` (``prediction``) is the prediction.

The metrics, the pictures and ``after_eval_batch`` hooks see the prediction. Each loss of
the config's ``loss:`` list gets the prediction too, unless its ``output`` says otherwise:
an index (``output: 1``) or a key (``output: aux``) selects an auxiliary output, and
``output: all`` hands it everything the network returned. A loss returns a scalar tensor.
"""

from __future__ import annotations

import inspect
from typing import Any, Optional, Union

import torch

from utils.errors import ContractError

PREDICTION = "prediction"  # model.prediction_key's default
Selector = Union[None, int, str]  # a loss's ``output``: None (the prediction), an index, a key, or "all"


def where(obj: Any) -> str:
    """``ClassName (path/to/file.py)`` of ``obj``'s class, for messages about the user's code."""
    cls = type(obj)
    try:
        source = inspect.getsourcefile(cls) or "?"
    except TypeError:  # a class defined in a builtin module
        source = "?"
    return f"{cls.__name__} ({source})"


def _describe(value: Any) -> str:
    if isinstance(value, torch.Tensor):
        return f"a tensor of shape {list(value.shape)}"
    if isinstance(value, dict):
        return f"a dict with keys {sorted(map(str, value))}"
    if isinstance(value, (list, tuple)):
        return f"a {type(value).__name__} of {len(value)}"
    return f"a {type(value).__name__}"


def prediction_key(criterion: Any) -> str:
    """The run's ``model.prediction_key``, which a criterion of ``build_criterion`` carries (a plain loss: the default)."""
    return getattr(criterion, "prediction_key", PREDICTION)


def select(outputs: Any, selector: Selector, key: str = PREDICTION) -> Any:
    """The part of a network's ``outputs`` that ``selector`` names (None: the prediction)."""
    if selector == "all":
        return outputs
    if isinstance(outputs, torch.Tensor):
        if selector is None:
            return outputs
        raise ContractError(
            f"a loss asks for output {selector!r}, but the network returned one tensor; remove 'output' from that loss, or return a tuple or dict"
        )
    if isinstance(outputs, (list, tuple)):
        index = 0 if selector is None else selector
        if isinstance(index, int) and -len(outputs) <= index < len(outputs):
            return outputs[index]
        raise ContractError(
            f"output {selector!r} asked for, but the network returned {_describe(outputs)}; give an index below {len(outputs)}"
        )
    if isinstance(outputs, dict):
        name = key if selector is None else selector
        if name in outputs:
            return outputs[name]
        fix = (
            "set model.prediction_key to the entry that holds the prediction"
            if selector is None
            else "give one of its keys as the loss's output"
        )
        raise ContractError(f"output '{name}' asked for, but the network returned {_describe(outputs)}; {fix}")
    raise ContractError(
        f"the network returned {_describe(outputs)}; it must return a tensor, a tuple/list (the prediction first) or a dict"
    )


def check_network_outputs(outputs: Any, network: Any, key: str = PREDICTION) -> torch.Tensor:
    """The first batch's prediction, once its outputs follow the contract: a ContractError naming the
    network's class and file otherwise."""
    try:
        prediction = select(outputs, None, key)
    except ContractError as err:
        raise ContractError(f"network {where(network)}: {err}") from None
    if not isinstance(prediction, torch.Tensor):
        raise ContractError(
            f"network {where(network)}: its prediction is {_describe(prediction)}; it must be a tensor (see README: what a network returns)"
        )
    return prediction


def check_loss_value(value: Any, loss: Any, selector: Optional[Selector] = None) -> None:
    """A loss returned a scalar tensor; else a ContractError naming its class and file (a host-side shape check, no read)."""
    if isinstance(value, torch.Tensor) and value.dim() == 0:
        return
    got = _describe(value)
    hint = " (reduce it, e.g. .mean())" if isinstance(value, torch.Tensor) else ""
    given = (
        "everything the network returned"
        if selector == "all"
        else "the prediction"
        if selector is None
        else f"output {selector!r}"
    )
    raise ContractError(f"loss {where(loss)} returned {got} given {given}; a loss must return a scalar tensor{hint}")
