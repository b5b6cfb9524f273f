"""Batches whose parts may be tensors or nested containers of them (``utils/tree.py`` walks them)."""

from __future__ import annotations

from typing import Any, Sequence, Tuple

import torch

from utils.errors import DataError
from utils.tree import map_tensors, tensors_in


def to_device(batch: Any, device: torch.device) -> Any:
    """Move every tensor of ``batch`` (dicts, lists, tuples, namedtuples, dataclasses) to ``device``."""
    return map_tensors(lambda t: t.to(device, non_blocking=True), batch)


def batch_size_of(inputs: Any) -> int:
    """The number of samples in ``inputs``: the leading dimension of its first tensor."""
    first = next(tensors_in(inputs), None)
    if first is None:
        raise TypeError(
            f"a batch's inputs hold no tensor (got {type(inputs).__name__}); the dataset must return tensors"
        )
    return first.shape[0]


def check_one_size(samples: Sequence[Tuple[str, Sequence[int]]], fix: str) -> None:
    """A DataError naming two of ``samples`` (name, tensor shape) whose images differ in size, and ``fix``."""
    first = {}
    for name, shape in samples:
        first.setdefault(tuple(shape), name)
    if len(first) > 1:
        (a, name_a), (b, name_b) = list(first.items())[:2]
        raise DataError(
            f"images of different sizes cannot form a batch: '{name_a}' is {a[-1]}x{a[-2]} and '{name_b}' is {b[-1]}x{b[-2]} "
            f"(width x height, after the transforms); resize them all to one size: {fix}"
        )
