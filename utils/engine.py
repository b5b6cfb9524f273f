"""The training and evaluation loops, written once for 1 or N processes."""

from __future__ import annotations

import contextlib
import logging
import math
import time
from typing import Any, Callable, Dict, Iterable, Optional

import torch
from torch import nn

from utils.amp import Amp
from utils.batch import batch_size_of, to_device
from utils.dist import all_reduce_sums
from utils.log import RunWriter, progress
from utils.metrics.base import Metric

log = logging.getLogger(__name__)


class NonFiniteLossError(RuntimeError):
    """The loss became NaN or inf."""


def train_one_epoch(
    model: nn.Module,
    loader: Iterable,
    criterion: Callable[[Any, Any], torch.Tensor],
    optimizer: torch.optim.Optimizer,
    scheduler: Any,
    amp: Amp,
    device: torch.device,
    epoch: int,
    global_step: int,
    writer: RunWriter,
    num_batches: Optional[int] = None,
    accumulate: int = 1,
    clip_grad_norm: Optional[float] = None,
    clip_grad_value: Optional[float] = None,
    log_every: int = 10,
    show_progress: bool = True,
    ema: Optional[Any] = None,
    max_steps: Optional[int] = None,
) -> Dict[str, float]:
    """One pass over ``loader``; returns the mean loss, throughput and the new global step.

    ``scheduler`` advances once per optimizer step that was taken, so LR follows
    iterations. With ``accumulate`` K, gradients of K micro-batches are summed
    (each loss divided by K; by the group's size for a shorter last group)
    before one step; DDP synchronizes only on the last. ``ema`` (a ModelEma)
    follows the weights after each step taken; the epoch ends early once
    ``global_step`` reaches ``max_steps``.
    """
    model.train()
    loss_sum, samples, steps_taken = 0.0, 0, 0
    start = time.perf_counter()
    bar = progress(loader, num_batches, f"epoch {epoch}", show_progress)
    optimizer.zero_grad(set_to_none=True)
    for i, (inputs, targets) in enumerate(bar):
        inputs, targets = to_device(inputs, device), to_device(targets, device)
        last_micro = (i + 1) % accumulate == 0 or (num_batches is not None and i + 1 == num_batches)
        group_start = i - i % accumulate
        group_size = accumulate if num_batches is None else min(accumulate, num_batches - group_start)
        sync = contextlib.nullcontext() if last_micro or not hasattr(model, "no_sync") else model.no_sync()
        with sync:
            with amp.autocast():
                outputs = model(inputs)
                loss = criterion(outputs, targets)
            if not torch.isfinite(loss):
                raise NonFiniteLossError(
                    f"loss is {loss.item()} at epoch {epoch}, step {global_step}; lower optim.lr, "
                    "enable train.clip_grad_norm, or use amp.opt_level=O0; the last good checkpoint is kept"
                )
            amp.backward(loss / group_size)  # the step sees the mean over the group
        n = batch_size_of(inputs)
        loss_sum += loss.item() * n
        samples += n
        if not last_micro:
            continue
        taken = amp.step(optimizer, clip_grad_norm, clip_grad_value)
        optimizer.zero_grad(set_to_none=True)
        if taken:
            scheduler.step()
            steps_taken += 1
            if ema is not None:
                ema.update(model)
        global_step += 1
        if global_step % log_every == 0:
            lr = optimizer.param_groups[0]["lr"]
            writer.scalars("train", {"loss": loss.item(), "lr": lr}, global_step)
            if hasattr(bar, "set_postfix"):
                bar.set_postfix(loss=f"{loss.item():.4f}", lr=f"{lr:.2e}")
        if max_steps is not None and global_step >= max_steps:
            break
    elapsed = time.perf_counter() - start
    stats = {
        "loss": loss_sum / max(samples, 1),
        "samples_per_s": samples / elapsed if elapsed > 0 else math.nan,
        "steps": float(steps_taken),
        "skipped_steps": float(getattr(amp, "skipped_steps", 0)),
    }
    writer.scalars("train_epoch", stats, epoch)
    stats["global_step"] = global_step
    return stats


@torch.no_grad()
def evaluate(
    model: nn.Module,
    loader: Iterable,
    criterion: Optional[Callable[[Any, Any], torch.Tensor]],
    metric: Metric,
    amp: Amp,
    device: torch.device,
    num_batches: Optional[int] = None,
    show_progress: bool = True,
    on_batch: Optional[Callable[[Any, Any, Any], None]] = None,
) -> Dict[str, float]:
    """Metrics of ``model`` over ``loader``, reduced exactly over all ranks.

    Each rank sees a disjoint shard; metrics and the loss are kept as sums and
    counts and summed across ranks, so the result equals a single-process run.
    ``on_batch(inputs, outputs, targets)`` lets a task save predictions.
    """
    model.eval()
    metric.reset()
    loss_sums = {"loss_sum": torch.zeros((), dtype=torch.float64), "loss_count": torch.zeros((), dtype=torch.float64)}
    for inputs, targets in progress(loader, num_batches, "eval", show_progress):
        inputs, targets = to_device(inputs, device), to_device(targets, device)
        n = batch_size_of(inputs)
        loss_sums["loss_count"] += n
        with amp.autocast():
            outputs = model(inputs)
            if criterion is not None:
                loss_sums["loss_sum"] += criterion(outputs, targets).double().cpu() * n
        metric.update(outputs, targets)
        if on_batch is not None:
            on_batch(inputs, outputs, targets)
    results = metric.result()
    reduced = all_reduce_sums(loss_sums)
    if criterion is not None:
        results["loss"] = (reduced["loss_sum"] / reduced["loss_count"].clamp_min(1)).item()
    results["samples"] = int(reduced["loss_count"].item())  # over all ranks: each sample exactly once
    return results
