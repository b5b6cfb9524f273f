"""Helpers for batches whose parts may be tensors, dicts, lists or tuples of them."""

from __future__ import annotations

from typing import Any

import torch


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
