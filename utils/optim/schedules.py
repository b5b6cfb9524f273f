"""Learning-rate schedules stepped every optimizer step: linear warm-up, then constant, step, cosine or poly."""

from __future__ import annotations

import logging
import math
from typing import Any, Callable

import torch

from utils.config.schema import ScheduleConfig

log = logging.getLogger(__name__)


def lr_factor_fn(cfg: ScheduleConfig, iters_per_epoch: int, total_iters: int) -> Callable[[int], float]:
    """The factor on each group's base LR at iteration ``it``: linear warm-up, then the schedule.

    A warm-up longer than the run (a run given in ``train.iterations``; in epochs the config
    refuses it) is shortened to the run, with a warning: the LR then peaks at the last step."""
    warmup = int(round(cfg.warmup_epochs * iters_per_epoch))
    if warmup > total_iters:
        log.warning(
            "schedule.warmup_epochs=%g is %d steps (%d per epoch), longer than the run's %d steps: the warm-up is cut to the run "
            "and the LR reaches optim.lr only at the last step; set schedule.warmup_epochs below %.3g for a warm-up within the run",
            cfg.warmup_epochs,
            warmup,
            iters_per_epoch,
            total_iters,
            total_iters / max(iters_per_epoch, 1),
        )
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


def build_scheduler(
    optimizer: torch.optim.Optimizer, cfg: ScheduleConfig, iters_per_epoch: int, total_iters: int
) -> torch.optim.lr_scheduler.LambdaLR:
    """A scheduler stepped once per optimizer step (not per epoch)."""
    return torch.optim.lr_scheduler.LambdaLR(optimizer, lr_factor_fn(cfg, iters_per_epoch, total_iters))


def rewind(scheduler: Any, steps: int) -> bool:
    """Take back ``steps`` of ``scheduler``'s steps (optimizer updates the device skipped, learnt at a
    sync point), so the next LR is the one of the steps actually taken. Closed-form schedules only
    (LambdaLR, which ``build_scheduler`` makes, or one with ``_get_closed_form_lr``); otherwise a
    warning, and False."""
    if steps <= 0:
        return True
    if not closed_form(scheduler):
        log.warning(
            "%d step(s) skipped on the device also advanced the LR schedule (%s cannot be rewound)",
            steps,
            type(scheduler).__name__,
        )
        return False
    scheduler.last_epoch -= steps
    recompute_lr(scheduler)
    return True


def closed_form(scheduler: Any) -> bool:
    """Whether the LR of any step can be computed from the step alone."""
    return isinstance(scheduler, torch.optim.lr_scheduler.LambdaLR) or hasattr(scheduler, "_get_closed_form_lr")


def follow_optimizer(scheduler: Any) -> None:
    """Take the base LRs from the optimizer's groups (``initial_lr``, what this run's config set) after
    a resume loaded the schedule's state, whose base LRs are those of the run that saved it."""
    if hasattr(scheduler, "base_lrs"):
        scheduler.base_lrs = [group.get("initial_lr", group["lr"]) for group in scheduler.optimizer.param_groups]


def recompute_lr(scheduler: Any) -> None:
    """Set every group's LR to the schedule's value at its current step (``last_epoch``).

    After a resume the schedule is the one built for the run's current length: a run resumed
    with a longer ``train.iterations``/``train.epochs`` steps on the new schedule from its first
    resumed step (the same length gives the same values, bit for bit). Other schedules keep
    the LR their state restored."""
    if isinstance(scheduler, torch.optim.lr_scheduler.LambdaLR):
        values = [base * fn(scheduler.last_epoch) for fn, base in zip(scheduler.lr_lambdas, scheduler.base_lrs)]
    elif hasattr(scheduler, "_get_closed_form_lr"):
        values = scheduler._get_closed_form_lr()
    else:
        return
    for group, lr in zip(scheduler.optimizer.param_groups, values):
        group["lr"] = lr
    scheduler._last_lr = list(values)
