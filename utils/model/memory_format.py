"""``model.channels_last``: weights and 4-D inputs in channels_last (NHWC) memory format.

Convolutions on GPUs (tensor cores, cuDNN) and oneDNN on CPUs run faster on
NHWC data; the values and shapes are the same, only the strides differ, so the
model and its checkpoints do not change. 5-D tensors (video) keep their layout.
"""

from __future__ import annotations

import logging
from typing import Any

import torch
from torch import nn

from utils.tree import map_inputs

log = logging.getLogger(__name__)


def _nhwc(tensor: torch.Tensor) -> torch.Tensor:
    return tensor.contiguous(memory_format=torch.channels_last) if tensor.dim() == 4 else tensor


@torch.no_grad()
def to_channels_last(model: nn.Module) -> nn.Module:
    """Every 4-D parameter and buffer of ``model`` in channels_last, in place (the Parameter objects stay)."""
    count = 0
    for module in model.modules():
        for param in module.parameters(recurse=False):
            if param.dim() == 4:
                param.data = _nhwc(param.data)
                count += 1
        for name, buf in module.named_buffers(recurse=False):
            if buf is not None and buf.dim() == 4:
                module._buffers[name] = _nhwc(buf)
    log.info("model.channels_last: %d 4-D weight(s) in channels_last memory format", count)
    return model


def inputs_channels_last(batch: Any) -> Any:
    """A batch ``(inputs, ...)`` (or bare inputs) whose 4-D floating input tensors are channels_last."""
    return map_inputs(lambda t: _nhwc(t) if t.is_floating_point() else t, batch)
