"""Batches whose parts may be tensors or nested containers of them (``utils/tree.py`` walks them)."""

from __future__ import annotations

from typing import Any

import torch

from utils.tree import map_tensors, tensors_in


def to_device(batch: Any, device: torch.device) -> Any:
    """Move every tensor of ``batch`` (dicts, lists, tuples, namedtuples, dataclasses) to ``device``."""
    return map_tensors(lambda t: t.to(device, non_blocking=True), batch)


def batch_size_of(inputs: Any) -> int:
    """The number of samples in ``inputs``: the leading dimension of its first tensor."""
    first = next(tensors_in(inputs), None)
    if first is None:
        raise TypeError(f"a batch's inputs hold no tensor (got {type(inputs).__name__}); the dataset must return tensors")
    return first.shape[0]
