"""Synchronized BatchNorm for any backend (gloo on CPU included).

``nn.SyncBatchNorm`` refuses CPU tensors. This layer reduces the per-channel
batch statistics (sum, sum of squares, element count) over the process group
in the forward pass, and the two gradient sums the input gradient needs in the
backward pass, so its output, running statistics and gradients are those of one
BatchNorm over the global batch, also when ranks hold batches of unequal size.
Weight and bias gradients stay per-rank sums; DDP reduces them like any other
parameter gradient. Outside training or without a process group it is a plain
BatchNorm.
"""

from __future__ import annotations

from typing import Any, Optional, Tuple, Type

import torch
import torch.distributed as dist
from torch import Tensor, nn
from torch.nn.modules.batchnorm import _BatchNorm


def _channel_view(t: Tensor, ndim: int) -> Tensor:
    return t.view(1, -1, *([1] * (ndim - 2)))


class _SyncBatchNormFunction(torch.autograd.Function):
    """y = (x - mean) / sqrt(var + eps) * weight + bias with mean/var over all ranks."""

    @staticmethod
    def forward(
        ctx: Any, x: Tensor, weight: Optional[Tensor], bias: Optional[Tensor], eps: float, group: Any
    ) -> Tuple[Tensor, Tensor, Tensor, Tensor]:
        channels = x.shape[1]
        dims = [0, *range(2, x.ndim)]
        # float64 sums: E[x^2] - E[x]^2 loses nothing that matters at these magnitudes.
        xd = x.detach().double()
        local_count = x.numel() // max(channels, 1)
        stats = torch.cat([xd.sum(dims), (xd * xd).sum(dims), xd.new_full((1,), float(local_count))])
        dist.all_reduce(stats, group=group)
        count = stats[-1].clone()
        if count.item() <= 1:
            raise ValueError(
                f"SyncBatchNorm needs more than 1 value per channel over all ranks when training, got input {list(x.shape)} on this rank"
            )
        mean = stats[:channels] / count
        var = (stats[channels : 2 * channels] / count - mean * mean).clamp_min(0.0)
        invstd = (var + eps).rsqrt()
        xhat = (x - _channel_view(mean.to(x.dtype), x.ndim)) * _channel_view(invstd.to(x.dtype), x.ndim)
        # a new tensor either way: a later in-place op (ReLU(inplace=True)) must not touch the saved xhat
        y = xhat * _channel_view(weight.to(x.dtype), x.ndim) if weight is not None else xhat.clone()
        if bias is not None:
            y = y + _channel_view(bias.to(x.dtype), x.ndim)
        ctx.save_for_backward(xhat, weight, invstd)
        ctx.group = group
        ctx.count = count
        ctx.has_bias = bias is not None
        ctx.mark_non_differentiable(mean, var, count)
        return y, mean, var, count

    @staticmethod
    def backward(ctx: Any, grad_out: Tensor, *_unused: Tensor) -> Tuple[Optional[Tensor], ...]:
        xhat, weight, invstd = ctx.saved_tensors
        ndim, channels = grad_out.ndim, grad_out.shape[1]
        dims = [0, *range(2, ndim)]
        gd = grad_out.double()
        sum_dy = gd.sum(dims)
        sum_dy_xhat = (gd * xhat.double()).sum(dims)
        grad_x = grad_weight = grad_bias = None
        if ctx.needs_input_grad[0]:
            # dx = w * invstd * (dy - mean(dy) - xhat * mean(dy * xhat)), means over the global batch
            sums = torch.cat([sum_dy, sum_dy_xhat])
            dist.all_reduce(sums, group=ctx.group)
            mean_dy = sums[:channels] / ctx.count
            mean_dy_xhat = sums[channels:] / ctx.count
            scale = invstd if weight is None else invstd * weight.double()
            grad_x = (
                gd - _channel_view(mean_dy, ndim) - xhat.double() * _channel_view(mean_dy_xhat, ndim)
            ) * _channel_view(scale, ndim)
            grad_x = grad_x.to(grad_out.dtype)
        if weight is not None and ctx.needs_input_grad[1]:
            grad_weight = sum_dy_xhat.to(weight.dtype)
        if ctx.has_bias and ctx.needs_input_grad[2]:
            grad_bias = sum_dy.to(grad_out.dtype if weight is None else weight.dtype)
        return grad_x, grad_weight, grad_bias, None, None


class CPUSyncBatchNorm(_BatchNorm):
    """A synchronized BatchNorm for inputs ``[N, C, *]`` that also runs on CPU tensors (gloo).

    Not a subclass of ``nn.SyncBatchNorm``: DDP rejects those on CPU modules. Its
    state_dict has BatchNorm's keys, so checkpoints load into either.
    """

    def __init__(
        self,
        num_features: int,
        eps: float = 1e-5,
        momentum: Optional[float] = 0.1,
        affine: bool = True,
        track_running_stats: bool = True,
        process_group: Any = None,
    ) -> None:
        super().__init__(num_features, eps, momentum, affine, track_running_stats)
        self.process_group = process_group

    def _check_input_dim(self, input: Tensor) -> None:
        if input.dim() < 2:
            raise ValueError(f"expected at least 2D input [N, C, *] (got {input.dim()}D input)")

    def forward(self, input: Tensor) -> Tensor:
        group = self.process_group or dist.group.WORLD
        distributed = dist.is_available() and dist.is_initialized() and dist.get_world_size(group) > 1
        if not (self.training and distributed):
            return super().forward(input)  # eval, or one process: plain BatchNorm
        self._check_input_dim(input)
        y, mean, var, count = _SyncBatchNormFunction.apply(input, self.weight, self.bias, self.eps, group)
        if self.track_running_stats and self.running_mean is not None and self.running_var is not None:
            self.num_batches_tracked.add_(1)
            factor = 1.0 / float(self.num_batches_tracked) if self.momentum is None else self.momentum
            with torch.no_grad():
                unbiased = var * (count / (count - 1))  # BatchNorm keeps the unbiased variance
                self.running_mean.mul_(1 - factor).add_(mean.to(self.running_mean.dtype), alpha=factor)
                self.running_var.mul_(1 - factor).add_(unbiased.to(self.running_var.dtype), alpha=factor)
        return y


def convert_batchnorm(module: nn.Module, cls: Type[_BatchNorm], process_group: Any = None) -> nn.Module:
    """Replace every BatchNorm in ``module`` by ``cls`` (an ``nn.SyncBatchNorm`` class),
    keeping the same Parameter objects, buffers, train/eval mode and requires_grad."""
    out = module
    if isinstance(module, _BatchNorm) and not isinstance(module, cls):
        out = cls(
            module.num_features, module.eps, module.momentum, module.affine, module.track_running_stats, process_group
        )
        if module.affine:
            with torch.no_grad():
                out.weight = module.weight
                out.bias = module.bias
        out.running_mean = module.running_mean
        out.running_var = module.running_var
        out.num_batches_tracked = module.num_batches_tracked
        out.train(module.training)
        if hasattr(module, "qconfig"):
            out.qconfig = module.qconfig
    for name, child in module.named_children():
        out.add_module(name, convert_batchnorm(child, cls, process_group))
    return out
