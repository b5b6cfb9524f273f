"""Framework train step (the Trainer's ``run_step`` and per-step hooks) vs a hand-written PyTorch loop.

Same network, initial weights, batches, optimizer and learning-rate schedule;
the framework path adds its Amp(O0), weighted criterion, loss check and the
hooks every run calls per step (logging, progress, preemption). Reports samples/s framework / plain, an A/A control (plain vs
the same plain loop) and the weight difference after the same steps.
"""

from __future__ import annotations

import copy
import statistics
from typing import List

import torch
import torch.nn.functional as F

from benchmarks.common import batches, framework_epoch, interleaved, max_abs_diff, ratios, row, timed
from utils.config.schema import ScheduleConfig
from utils.optim.schedules import build_scheduler, lr_factor_fn
from utils.registry import NETWORKS

DEVICE = torch.device("cpu")
BATCH = 32


def _network() -> torch.nn.Module:
    torch.manual_seed(0)
    return NETWORKS.build("classifier", num_classes=10, backbone_args={"widths": [16, 32, 64]})


def _optimizer(model: torch.nn.Module) -> torch.optim.Optimizer:
    return torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=1e-4)


def framework_run(init: torch.nn.Module, data: List, schedule: ScheduleConfig) -> torch.nn.Module:
    model = copy.deepcopy(init)
    optimizer = _optimizer(model)
    framework_epoch(model, data, optimizer, build_scheduler(optimizer, schedule, len(data), len(data)))
    return model


def plain_run(init: torch.nn.Module, data: List, schedule: ScheduleConfig) -> torch.nn.Module:
    model = copy.deepcopy(init)
    optimizer = _optimizer(model)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lr_factor_fn(schedule, len(data), len(data)))
    model.train()
    for inputs, targets in data:
        optimizer.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(inputs), targets)
        loss.backward()
        optimizer.step()
        scheduler.step()
    return model


def run(quick: bool = False) -> List[dict]:
    steps, rounds = (6, 3) if quick else (30, 7)
    data = batches(steps, BATCH, (1, 16, 16))
    init = _network()
    schedule = ScheduleConfig(name="cosine", warmup_epochs=0.5)
    times = interleaved(
        {
            "framework": lambda: timed(lambda: framework_run(init, data, schedule)),
            "plain": lambda: timed(lambda: plain_run(init, data, schedule)),
            "plain_again": lambda: timed(lambda: plain_run(init, data, schedule)),
        },
        rounds,
    )
    # samples/s ratio = time ratio inverted; each pair comes from the same round.
    speed = ratios(times["plain"], times["framework"])
    control = ratios(times["plain"], times["plain_again"])
    diff = max_abs_diff(framework_run(init, data, schedule).state_dict(), plain_run(init, data, schedule).state_dict())
    plain_sps = statistics.median(steps * BATCH / t for t in times["plain"])
    return [
        row(
            "1 framework step",
            "samples/s framework / plain",
            speed,
            ">= 0.98",
            lambda m: m >= 0.98,
            f"small_cnn classifier, {steps} steps of batch {BATCH} per round; plain loop {plain_sps:.0f} samples/s",
        ),
        row(
            "1 framework step",
            "A/A control: plain / plain",
            control,
            "1.00 +- noise",
            None,
            "the same plain loop timed twice per round",
        ),
        row(
            "1 framework step",
            f"max abs weight diff after {steps} steps, O0",
            [diff],
            "0",
            lambda m: m == 0.0,
            "framework vs plain, same init and batches",
            fmt="{:.1e}",
        ),
    ]
