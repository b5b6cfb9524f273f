"""DDP: 2 processes x 1 thread vs 1 process x 1 thread, and the framework's DDP step vs a hand-written one.

Two real processes (gloo over TCP, started with torch.multiprocessing). Every
round rank 0 first (or last: the order alternates) trains the network alone
on the full global batches while rank 1 waits in a barrier, then both train a
DDP copy from the same initial weights on half of each batch, through the
framework's Trainer. The network has no BatchNorm, so averaged DDP
gradients equal full-batch gradients and the weights must agree.

The second comparison times, in the same rounds, the framework's 2-rank step
(``wrap_model``'s DDP with its defaults, the Trainer with its per-step hooks)
against a hand-written DDP loop (``DistributedDataParallel(model)``, zero_grad,
forward, backward, step) on the same model, batches and optimizer: samples/s
framework / hand, and the weights after the same steps.
"""

from __future__ import annotations

import copy
import time
from typing import Dict, List

import torch
import torch.distributed as dist
from torch import nn

from benchmarks.common import batches, hand_loop, in_processes, max_abs_diff, ratios, row

TIMEOUT_S = 240
GLOBAL_BATCH = 64


def _network() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(
        nn.Conv2d(1, 32, 3, padding=1),
        nn.ReLU(),
        nn.Conv2d(32, 32, 3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 3, padding=1),
        nn.ReLU(),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(64, 10),
    )


def _train(model: nn.Module, data: List) -> float:
    """Seconds for one pass of the framework loop over ``data``."""
    from benchmarks.common import framework_epoch

    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda it: 1.0)
    start = time.perf_counter()
    framework_epoch(model, data, optimizer, scheduler, nn.functional.cross_entropy)
    return time.perf_counter() - start


def _hand(model: nn.Module, data: List) -> float:
    """Seconds for one pass of a hand-written DDP loop over ``data`` (what a user writes without a framework)."""
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda it: 1.0)
    start = time.perf_counter()
    hand_loop(model, data, optimizer, scheduler)
    return time.perf_counter() - start


def _framework_ddp(model: nn.Module, rank: int, world: int) -> nn.Module:
    from utils.config.schema import DistConfig
    from utils.distributed.parallel import wrap_model
    from utils.distributed.process_group import DistInfo

    return wrap_model(model, DistConfig(), DistInfo(rank=rank, world_size=world))


def _figures(rank: int, world: int, steps: int, rounds: int) -> dict:
    """This rank's part of the measurement, in the process group; rank 0's figures are the result."""
    init = _network()
    full = batches(steps, GLOBAL_BATCH, (1, 16, 16))
    half = GLOBAL_BATCH // world
    local = [(x[rank * half : (rank + 1) * half], y[rank * half : (rank + 1) * half]) for x, y in full]
    times: Dict[str, List[float]] = {"single": [], "ddp": [], "framework": [], "hand": []}
    diffs: List[float] = []
    hand_diffs: List[float] = []

    def timed_ddp(model: nn.Module, train) -> nn.Module:
        dist.barrier()
        elapsed = train(model, local)
        dist.barrier()  # the step time of the slower rank counts
        times["framework" if train is _train else "hand"].append(elapsed)
        return model.module

    def single() -> nn.Module:
        model = copy.deepcopy(init)
        if rank == 0:
            times["single"].append(_train(model, full))
        dist.barrier()
        return model

    def ddp() -> nn.Module:
        model = nn.parallel.DistributedDataParallel(copy.deepcopy(init))
        dist.barrier()
        elapsed = _train(model, local)
        dist.barrier()  # the step time of the slower rank counts
        times["ddp"].append(elapsed)
        return model.module

    def framework() -> nn.Module:
        return timed_ddp(_framework_ddp(copy.deepcopy(init), rank, world), _train)

    def hand() -> nn.Module:
        return timed_ddp(nn.parallel.DistributedDataParallel(copy.deepcopy(init)), _hand)

    ddp(), single(), framework(), hand()  # warm-up (DDP builds its buckets on the first step)
    times = {name: [] for name in times}
    for r in range(rounds):
        if r % 2 == 0:
            a, b = single(), ddp()
            c, d = framework(), hand()
        else:
            b, a = ddp(), single()
            d, c = hand(), framework()
        if rank == 0:
            diffs.append(max_abs_diff(a.state_dict(), b.state_dict()))
            hand_diffs.append(max_abs_diff(c.state_dict(), d.state_dict()))
    return {"times": times, "diffs": diffs, "hand_diffs": hand_diffs}


def measure(steps: int, rounds: int, world: int = 2) -> dict:
    """Start ``world`` processes, wait at most TIMEOUT_S, return rank 0's figures."""
    return in_processes(_figures, world, (steps, rounds), TIMEOUT_S, "DDP benchmark")


def run(quick: bool = False) -> List[dict]:
    steps, rounds = (4, 2) if quick else (20, 5)
    out = measure(steps, rounds)
    speedup = ratios(out["times"]["single"], out["times"]["ddp"])
    diff = max(out["diffs"])
    return [
        row(
            "5 DDP",
            "speed-up 2 proc x 1 thread / 1 proc x 1 thread",
            speedup,
            ">= 1.35",
            lambda m: m >= 1.35,
            f"gloo, global batch {GLOBAL_BATCH}, {steps} steps per round, framework loop",
        ),
        row(
            "5 DDP",
            f"max abs weight diff DDP vs full batch, {steps} steps",
            [diff],
            "allclose (~1e-6)",
            lambda m: m <= 1e-5,
            "no BatchNorm: averaged gradients = full-batch gradient",
            fmt="{:.1e}",
        ),
        row(
            "5 DDP",
            "samples/s framework 2-rank step / hand-written 2-rank DDP loop",
            ratios(out["times"]["hand"], out["times"]["framework"]),
            ">= 0.97",
            lambda m: m >= 0.97,
            f"gloo, {GLOBAL_BATCH // 2} per rank, {steps} steps per round; framework: wrap_model (gradient_as_bucket_view) + Trainer with its hooks",
        ),
        row(
            "5 DDP",
            f"max abs weight diff framework vs hand DDP, {steps} steps",
            [max(out["hand_diffs"])],
            "0",
            lambda m: m == 0.0,
            "same init, batches and optimizer",
            fmt="{:.1e}",
        ),
    ]
