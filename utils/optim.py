"""Optimizers with parameter groups, and per-iteration learning-rate schedules."""

from __future__ import annotations

import math
from typing import Any, Callable, Dict, List

import torch
from torch import nn

from utils.config import OptimConfig, ScheduleConfig


def is_no_decay(name: str, param: torch.Tensor) -> bool:
    """Biases and normalization weights (1-d tensors) are not weight-decayed."""
    return param.ndim <= 1 or name.endswith(".bias")


def param_groups(model: nn.Module, weight_decay: float) -> List[Dict[str, Any]]:
    """Trainable parameters split into decay / no-decay groups (frozen ones left out)."""
    decay, no_decay = [], []
    for name, param in model.named_parameters():
        if param.requires_grad:
            (no_decay if is_no_decay(name, param) else decay).append(param)
    groups = [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    return [g for g in groups if g["params"]]


def scaled_lr(lr: float, rule: str, world_size: int) -> float:
    """``linear``: lr * world_size; ``sqrt``: lr * sqrt(world_size) (the global batch grows with ranks)."""
    return {"none": lr, "linear": lr * world_size, "sqrt": lr * math.sqrt(world_size)}[rule]


def build_optimizer(model: nn.Module, cfg: OptimConfig, world_size: int = 1) -> torch.optim.Optimizer:
    """The configured optimizer over ``model``'s trainable parameters."""
    groups = param_groups(model, cfg.weight_decay)
    if not groups:
        raise ValueError("no trainable parameters: model.freeze froze everything; loosen the patterns")
    lr = scaled_lr(cfg.lr, cfg.lr_scaling, world_size)
    for group in groups:
        group.setdefault("lr", lr)
    if cfg.name == "sgd":
        return torch.optim.SGD(groups, lr=lr, momentum=cfg.momentum, nesterov=cfg.nesterov)
    if cfg.name == "adam":
        return torch.optim.Adam(groups, lr=lr, betas=tuple(cfg.betas))
    if cfg.name == "adamw":
        return torch.optim.AdamW(groups, lr=lr, betas=tuple(cfg.betas))
    raise ValueError(f"unknown optimizer optim.name='{cfg.name}'; choose sgd, adam or adamw")


def lr_factor_fn(cfg: ScheduleConfig, iters_per_epoch: int, total_iters: int) -> Callable[[int], float]:
    """The factor on each group's base LR at iteration ``it``: linear warm-up, then the schedule."""
    warmup = int(round(cfg.warmup_epochs * iters_per_epoch))
    warmup = min(warmup, max(total_iters - 1, 0))
    milestones = [m * iters_per_epoch for m in cfg.step_epochs]

    def factor(it: int) -> float:
        if it < warmup:
            return cfg.warmup_start_factor + (1.0 - cfg.warmup_start_factor) * it / warmup
        progress = (it - warmup) / max(total_iters - warmup, 1)
        progress = min(progress, 1.0)
        if cfg.name == "constant":
            return 1.0
        if cfg.name == "step":
            return cfg.gamma ** sum(it >= m for m in milestones)
        if cfg.name == "cosine":
            return cfg.min_lr_factor + (1 - cfg.min_lr_factor) * 0.5 * (1 + math.cos(math.pi * progress))
        return (1.0 - progress) ** cfg.power  # poly

    return factor


def build_scheduler(optimizer: torch.optim.Optimizer, cfg: ScheduleConfig, iters_per_epoch: int, total_iters: int) -> torch.optim.lr_scheduler.LambdaLR:
    """A scheduler stepped once per optimizer step (not per epoch)."""
    return torch.optim.lr_scheduler.LambdaLR(optimizer, lr_factor_fn(cfg, iters_per_epoch, total_iters))
