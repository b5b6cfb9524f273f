"""Prefetching: a loader with an I/O-like delay per batch close to the compute time.

Per round, four timings back to back: compute alone (batches in memory), loading
alone, and training through the framework loop with ``data.prefetch=none`` and
``thread``. Efficiency = ideal / actual with ideal = max(load, compute): 1.0
means loading is fully hidden behind compute.
"""

from __future__ import annotations

import copy
import statistics
import time
from typing import List

import torch
from torch.utils.data import DataLoader, Dataset

from benchmarks.common import batches, framework_epoch, interleaved, ratios, row, timed
from utils.data.prefetch import PrefetchLoader
from utils.registry import NETWORKS

DEVICE = torch.device("cpu")


class SlowBatches(Dataset):
    """Whole batches that each take ``delay`` seconds to "read" (a sleep: no CPU used, like disk or network I/O)."""

    def __init__(self, data: List, delay: float) -> None:
        self.data, self.delay = data, delay

    def __len__(self) -> int:
        return len(self.data)

    def __getitem__(self, i: int):
        time.sleep(self.delay)
        return self.data[i]


def _train(model: torch.nn.Module, loader) -> None:
    model = copy.deepcopy(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda it: 1.0)
    framework_epoch(model, loader, optimizer, scheduler, torch.nn.functional.cross_entropy)


def _drain(loader) -> None:
    for _ in loader:
        pass


def run(quick: bool = False) -> List[dict]:
    steps, rounds = (8, 2) if quick else (50, 5)
    torch.manual_seed(0)
    model = NETWORKS.build("classifier", num_classes=10, backbone_args={"widths": [8, 16, 32]})
    data = batches(steps, 16, (1, 16, 16))
    compute_per_batch = min(timed(lambda: _train(model, data)) for _ in range(2)) / steps
    dataset = SlowBatches(data, compute_per_batch)  # loading takes as long as computing
    plain = PrefetchLoader(DataLoader(dataset, batch_size=None), "none")
    thread = PrefetchLoader(DataLoader(dataset, batch_size=None), "thread", depth=2)
    times = interleaved(
        {
            "compute": lambda: timed(lambda: _train(model, data)),
            "load": lambda: timed(lambda: _drain(plain)),
            "none": lambda: timed(lambda: _train(model, plain)),
            "thread": lambda: timed(lambda: _train(model, thread)),
        },
        rounds,
        warmup=False,
    )
    ideal = [max(a, b) for a, b in zip(times["load"], times["compute"])]
    note = f"{steps} batches, load {1e3 * compute_per_batch:.1f} ms/batch, compute {1e3 * statistics.median(times['compute']) / steps:.1f} ms/batch"
    return [
        row(
            "2 prefetch",
            "efficiency max(load, compute) / time, prefetch=thread",
            ratios(ideal, times["thread"]),
            ">= 0.95",
            lambda m: m >= 0.95,
            note,
        ),
        row(
            "2 prefetch",
            "efficiency max(load, compute) / time, prefetch=none",
            ratios(ideal, times["none"]),
            "(baseline, ~0.5)",
            None,
            "load and compute in turn",
        ),
        row(
            "2 prefetch",
            "speed-up thread / none",
            ratios(times["none"], times["thread"]),
            "",
            None,
            "same loader and model",
        ),
    ]
