"""One training epoch, written once for 1 or N processes."""

from __future__ import annotations

import contextlib
import logging
import math
import re
import time
from typing import Any, Callable, Dict, Iterable, Optional

import torch
from torch import nn

from utils.amp import Amp
from utils.data.batch import batch_size_of, to_device
from utils.engine.nonfinite import NonFinitePolicy
from utils.errors import ConfigError
from utils.log import RunWriter, progress

log = logging.getLogger(__name__)


_CHANNELS = re.compile(r"expected input\[([^\]]*)\] to have (\d+) channels, but got (\d+) channels")


def input_error(err: RuntimeError) -> Exception:
    """A first-batch channel mismatch as a ConfigError saying what to change; other errors unchanged."""
    match = _CHANNELS.search(str(err))
    if not match:
        return err
    return ConfigError(
        f"the data has {match.group(3)} channel(s) per input but the network's first layer expects {match.group(2)}; "
        "set the backbone's in_channels (e.g. model.args.backbone_args={in_channels: " + match.group(3) + "}) or change the data"
    )


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
    start_batch: int = 0,
    on_step: Optional[Callable[[int, int], bool]] = None,
    nonfinite: Optional[NonFinitePolicy] = None,
) -> Dict[str, float]:
    """One pass over ``loader``; returns the mean loss, throughput and the new global step.

    ``scheduler`` advances once per optimizer step that was taken, so LR follows
    iterations. With ``accumulate`` K, gradients of K micro-batches are summed
    (each loss divided by K; by the group's size for a shorter last group)
    before one step; DDP synchronizes only on the last. ``ema`` (a ModelEma)
    follows the weights after each step taken; the epoch ends early once
    ``global_step`` reaches ``max_steps``.

    A resumed epoch passes ``start_batch`` (batches consumed before; ``loader``
    yields the rest) so accumulation groups line up with the first run.
    ``on_step(batches consumed, global_step)`` runs after each optimizer step
    (checkpoints, preemption); True ends the epoch there (``stopped`` is 1).
    ``nonfinite`` decides what a NaN/inf loss does (default: stop).
    """
    model.train()
    nonfinite = nonfinite or NonFinitePolicy()
    loss_sum, samples, steps_taken, stopped, group_bad = 0.0, 0, 0, False, False
    start = time.perf_counter()
    total = None if num_batches is None else num_batches - start_batch
    bar = progress(loader, total, f"epoch {epoch}", show_progress)
    optimizer.zero_grad(set_to_none=True)
    for i, (inputs, targets) in enumerate(bar, start=start_batch):
        inputs, targets = to_device(inputs, device), to_device(targets, device)
        last_micro = (i + 1) % accumulate == 0 or (num_batches is not None and i + 1 == num_batches)
        group_start = i - i % accumulate
        group_size = accumulate if num_batches is None else min(accumulate, num_batches - group_start)
        sync = contextlib.nullcontext() if last_micro or not hasattr(model, "no_sync") else model.no_sync()
        with sync:
            with amp.autocast():
                try:
                    outputs = model(inputs)
                except RuntimeError as err:
                    raise (input_error(err) if i == start_batch else err) from err
                loss = criterion(outputs, targets)
            if nonfinite.is_bad(loss):
                nonfinite.on_bad(loss, epoch, global_step)
                group_bad = True  # the whole accumulation group is dropped
            else:
                amp.backward(loss / group_size)  # the step sees the mean over the group
                n = batch_size_of(inputs)
                loss_sum += loss.item() * n
                samples += n
        if not last_micro:
            continue
        taken = not group_bad and amp.step(optimizer, clip_grad_norm, clip_grad_value)
        optimizer.zero_grad(set_to_none=True)
        if not group_bad:
            nonfinite.on_good()
        group_bad = False
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
        if on_step is not None and on_step(i + 1, global_step):
            stopped = True
            break
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
    stats["stopped"] = float(stopped)
    return stats
