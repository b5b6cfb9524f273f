"""``model.channels_last``: step time with NHWC weights and inputs vs contiguous (NCHW), on this machine's CPU.

resnet18 (the framework's classifier on the torchvision backbone) at 64x64,
AdamW, O0; both layouts from the same initial weights, stepped interleaved in
one process. Reported as measured: oneDNN on CPUs and cuDNN/tensor cores on
GPUs prefer NHWC, by how much depends on the machine (GPUs with tensor cores
are where it pays most).
"""

from __future__ import annotations

import copy
import time
from typing import Callable, List

import torch
from torch import nn

from benchmarks.common import interleaved, ratios, row
from utils.model.memory_format import inputs_channels_last, to_channels_last
from utils.registry import NETWORKS


def _stepper(model: nn.Module, x: torch.Tensor, y: torch.Tensor, steps: int) -> Callable[[], float]:
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    model.train()

    def run() -> float:
        start = time.perf_counter()
        for _ in range(steps):
            nn.functional.cross_entropy(model(x), y).backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
        return (time.perf_counter() - start) / steps

    return run


def run(quick: bool = False) -> List[dict]:
    batch, steps, rounds = (4, 1, 2) if quick else (32, 3, 7)
    torch.manual_seed(0)
    plain = NETWORKS.build("classifier", num_classes=10, backbone="resnet18")
    nhwc = to_channels_last(copy.deepcopy(plain))
    g = torch.Generator().manual_seed(0)
    x, y = torch.randn(batch, 3, 64, 64, generator=g), torch.randint(0, 10, (batch,), generator=g)
    with torch.no_grad():
        diff = (plain.eval()(x) - nhwc.eval()(inputs_channels_last(x))).abs().max().item()
    times = interleaved(
        {"nchw": _stepper(plain, x, y, steps), "nhwc": _stepper(nhwc, inputs_channels_last(x), y, steps)}, rounds
    )
    nchw_ms = sorted(times["nchw"])[len(times["nchw"]) // 2] * 1e3
    return [
        row(
            "10 channels_last",
            "step time channels_last / contiguous, CPU",
            ratios(times["nhwc"], times["nchw"]),
            "",
            None,
            f"resnet18 64x64 batch {batch}, AdamW, O0; contiguous step {nchw_ms:.0f} ms",
        ),
        row(
            "10 channels_last",
            "max abs output diff channels_last vs contiguous",
            [diff],
            "allclose (~1e-5)",
            lambda m: m <= 1e-4,
            "eval mode, same weights and batch",
            fmt="{:.1e}",
        ),
    ]
