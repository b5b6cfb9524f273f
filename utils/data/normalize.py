"""``Normalize``: a batch's image inputs as ``(x - mean) / std`` per channel, once per batch (in the prefetch thread,
or on the GPU in the CUDA prefetch stream); 8-bit batches become floats here."""

from __future__ import annotations

from typing import Any, Optional, Sequence, Tuple

import numpy as np
import torch

from utils.tree import map_inputs


class Normalize:
    """``(inputs - mean) / std`` per channel (dim 1) of every floating input tensor of a batch; targets untouched (no-op without mean/std).

    ``in_place``: the batches are new tensors nobody else holds (``collates_new_tensors``), so float32
    inputs are overwritten instead of copied: the same numbers without allocating and filling a second
    batch (a fresh 38 MB of 64x3x224x224 floats costs more in page faults than the arithmetic itself).
    ``eight_bit``: uint8 inputs are images (a dataset's ``batches_of_uint8``), made floats in [0, 1] here,
    once per batch, by the same arithmetic as ``as_float`` per image (so the same numbers), then normalized.
    """

    def __init__(
        self,
        mean: Optional[Sequence[float]],
        std: Optional[Sequence[float]],
        device: torch.device = torch.device("cpu"),
        in_place: bool = False,
        eight_bit: bool = False,
    ) -> None:
        self.in_place, self.eight_bit = in_place, eight_bit
        self.mean = self.std = None
        if mean is not None:
            self.mean = torch.tensor(mean, dtype=torch.float32, device=device).view(1, -1)
            self.std = torch.tensor(std, dtype=torch.float32, device=device).view(1, -1)

    def __call__(self, batch: Any) -> Any:
        if self.mean is None and not self.eight_bit:
            return batch
        return map_inputs(self._normalize, batch)

    def _normalize(self, inputs: torch.Tensor) -> torch.Tensor:
        in_place = self.in_place
        if self.eight_bit and inputs.dtype == torch.uint8:
            if inputs.device.type == "cpu" and inputs.dim() >= 1:
                return self._floats_of_host_bytes(inputs)
            inputs, in_place = torch.empty_like(inputs, dtype=torch.float32).copy_(inputs).mul_(1.0 / 255), True
        stats = self._stats(inputs, batched=True)
        if stats is None:
            return inputs
        mean, std = stats
        if in_place and inputs.dtype == torch.float32:
            return inputs.sub_(mean).div_(std)
        # the difference is new: dividing it in place gives the same numbers with one batch fewer to allocate
        return (inputs.float() - mean).div_(std)

    def _floats_of_host_bytes(self, inputs: torch.Tensor) -> torch.Tensor:
        """A uint8 batch in host memory as normalized floats, by the arithmetic of ``_normalize`` (the same numbers).

        The float batch is allocated by numpy, which asks the kernel for huge pages on large arrays
        (``madvise``): torch's allocator maps 4 KiB pages, whose first writes cost more than the arithmetic
        (75% of the time for a 64x3x224x224 batch). It is filled one sample at a time, each step's four
        passes over a sample that stays in the cache: 20 ms a batch becomes 5 on one core."""
        out = torch.from_numpy(np.empty(tuple(inputs.shape), dtype=np.float32))
        stats = self._stats(inputs, batched=False)
        for sample, values in zip(out, inputs):
            sample.copy_(values).mul_(1.0 / 255)
            if stats is not None:
                sample.sub_(stats[0]).div_(stats[1])
        return out

    def _stats(self, inputs: torch.Tensor, batched: bool) -> Optional[Tuple[torch.Tensor, torch.Tensor]]:
        """Mean and std shaped for ``inputs`` (a batch; with ``batched`` false, one of its samples at a time) when they
        are image-like, with one value per channel of mean/std; None for other tensors, left as they are."""
        if self.mean is None or inputs.dim() < 2 or inputs.shape[1] != self.mean.shape[1]:
            return None
        shape = (1, -1) + (1,) * (inputs.dim() - 2)
        shape = shape if batched else shape[1:]
        return self.mean.view(shape).to(inputs.device), self.std.view(shape).to(inputs.device)
