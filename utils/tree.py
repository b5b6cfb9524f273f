"""The one walker over nested batches and states: tensors inside dicts, lists, tuples, namedtuples and dataclasses.

Every place that maps over a batch (moving it to the device, casting it,
normalizing its inputs) or over a state (copying a checkpoint, hashing it)
uses these two functions, so they all agree on what a container is: a
``dict`` (of any subclass: ``OrderedDict``, ``defaultdict``, ...) keeps its
type and keys, a namedtuple stays that namedtuple, a list or tuple keeps its
type, a dataclass instance is rebuilt with ``dataclasses.replace``. Anything
else (numbers, strings, numpy arrays, ``None``) is a leaf left as it is.
"""

from __future__ import annotations

import copy
import dataclasses
from typing import Any, Callable, Iterator

import torch


def _is_namedtuple(value: Any) -> bool:
    return isinstance(value, tuple) and hasattr(type(value), "_fields")


def map_tensors(fn: Callable[[torch.Tensor], Any], tree: Any) -> Any:
    """``tree`` with every tensor ``t`` replaced by ``fn(t)``; the containers keep their types."""
    if isinstance(tree, torch.Tensor):
        return fn(tree)
    if isinstance(tree, dict):
        out = copy.copy(tree)  # the dict's own class and, for a defaultdict, its factory
        for key, value in tree.items():
            out[key] = map_tensors(fn, value)
        return out
    if _is_namedtuple(tree):
        return type(tree)(*(map_tensors(fn, value) for value in tree))
    if isinstance(tree, (list, tuple)):
        return type(tree)(map_tensors(fn, value) for value in tree)
    if dataclasses.is_dataclass(tree) and not isinstance(tree, type):
        changes = {f.name: map_tensors(fn, getattr(tree, f.name)) for f in dataclasses.fields(tree) if f.init}
        return dataclasses.replace(tree, **changes)
    return tree


def tensors_in(tree: Any) -> Iterator[torch.Tensor]:
    """Every tensor in ``tree``, depth first, in the order ``map_tensors`` visits them."""
    if isinstance(tree, torch.Tensor):
        yield tree
    elif isinstance(tree, dict):
        for value in tree.values():
            yield from tensors_in(value)
    elif isinstance(tree, (list, tuple)):
        for value in tree:
            yield from tensors_in(value)
    elif dataclasses.is_dataclass(tree) and not isinstance(tree, type):
        for f in dataclasses.fields(tree):
            if f.init:
                yield from tensors_in(getattr(tree, f.name))


def map_inputs(fn: Callable[[torch.Tensor], torch.Tensor], batch: Any) -> Any:
    """``(inputs, targets, ...)`` with ``fn`` applied to every tensor of the inputs only; a bare batch
    (not a list or tuple) is all inputs."""
    if isinstance(batch, (list, tuple)) and not hasattr(type(batch), "_fields") and batch:
        return type(batch)([map_tensors(fn, batch[0]), *batch[1:]])
    return map_tensors(fn, batch)
