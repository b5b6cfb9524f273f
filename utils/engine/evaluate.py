"""Evaluation whose metrics over N ranks equal those of one process."""

from __future__ import annotations

from typing import Any, Callable, Dict, Iterable, Optional

import torch
from torch import nn

from utils.amp import Amp
from utils.data.batch import batch_size_of, to_device
from utils.distributed.fsdp import full_weights
from utils.distributed.ops import all_reduce_sums
from utils.log import progress
from utils.metrics.base import Metric
from utils.model.outputs import prediction_key, select


@torch.no_grad()
def evaluate(
    model: nn.Module,
    loader: Iterable,
    criterion: Optional[Callable[[Any, Any], torch.Tensor]],
    metric: Metric,
    amp: Amp,
    device: torch.device,
    show_progress: bool = True,
    on_batch: Optional[Callable[[Any, Any, Any], None]] = None,
) -> Dict[str, float]:
    """Metrics of ``model`` over ``loader``, reduced exactly over all ranks.

    Each rank sees a disjoint slice; metrics and the loss are kept as sums and
    counts and summed across ranks, so the result equals a single-process run.
    ``on_batch(inputs, outputs, targets)`` lets a task save predictions.
    """
    model.eval()
    metric.reset()
    key = prediction_key(criterion)
    loss_sums = {"loss_sum": torch.zeros((), dtype=torch.float64), "loss_count": torch.zeros((), dtype=torch.float64)}
    num_batches = len(loader) if hasattr(loader, "__len__") else None
    with full_weights(model):  # fsdp: gathered once, so a rank with fewer batches leaves nobody waiting in a collective
        for inputs, targets in progress(loader, num_batches, "eval", show_progress):
            inputs, targets = to_device(inputs, device), to_device(targets, device)
            n = batch_size_of(inputs)
            loss_sums["loss_count"] += n
            with amp.autocast():
                outputs = model(inputs)
                loss = criterion(outputs, targets) if criterion is not None else None
            with amp.uncast():
                if loss is not None:
                    loss_sums["loss_sum"] += loss.double().cpu() * n
                # what the network returned beside it (auxiliary outputs) is the losses' only
                prediction = select(outputs, None, key)
                metric.update(prediction, targets)
            if on_batch is not None:
                on_batch(inputs, prediction, targets)
    results = metric.result()
    reduced = all_reduce_sums(loss_sums)
    if criterion is not None:
        results["loss"] = (reduced["loss_sum"] / reduced["loss_count"].clamp_min(1)).item()
    results["samples"] = int(reduced["loss_count"].item())  # over all ranks: each sample exactly once
    return results
