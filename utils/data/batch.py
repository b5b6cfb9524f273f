"""Helpers for batches whose parts may be tensors, dicts, lists or tuples of them."""

from __future__ import annotations

from typing import Any, Sequence, Tuple

import torch

from utils.errors import DataError


def to_device(batch: Any, device: torch.device) -> Any:
    """Move tensors (also inside lists, tuples and dicts) to ``device``."""
    if isinstance(batch, torch.Tensor):
        return batch.to(device, non_blocking=True)
    if isinstance(batch, dict):
        return {k: to_device(v, device) for k, v in batch.items()}
    if isinstance(batch, (list, tuple)):
        return type(batch)(to_device(v, device) for v in batch)
    return batch


def batch_size_of(inputs: Any) -> int:
    """The number of samples in ``inputs`` (the first tensor's leading dimension)."""
    if isinstance(inputs, torch.Tensor):
        return inputs.shape[0]
    if isinstance(inputs, dict):
        return batch_size_of(next(iter(inputs.values())))
    return batch_size_of(inputs[0])


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
