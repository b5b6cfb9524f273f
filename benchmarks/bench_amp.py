"""Step time and activation memory of amp O1 and O2 (bf16) relative to O0 on this machine.

resnet18 (the framework's classifier on the torchvision backbone) at 64x64,
batch 32, AdamW. The levels are measured interleaved (O0, O1, O2, O0, O1,
O2, ...) in one process, so drifts in machine load hit all of them alike; the
median over the repeats is reported. Activation memory is the bytes of the
tensors autograd saves for backward during one forward (counted with
``torch.autograd.graph.saved_tensors_hooks``; parameters are not counted, but
the low-precision weight copies autocast makes at O1 are listed apart).

    python benchmarks/bench_amp.py [--quick] [--threads N]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Dict, List, Tuple

import torch
from torch import nn

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.common import ratios, row  # noqa: E402
from utils.amp import Amp  # noqa: E402
from utils.config.schema import AmpConfig  # noqa: E402
from utils.registry import NETWORKS  # noqa: E402

LEVELS = ("O0", "O1", "O2")


def classifier(backbone: str, num_classes: int, **backbone_args: int) -> nn.Module:
    """The framework's classifier on ``backbone``, built from seed 0 (each level starts from the same weights)."""
    torch.manual_seed(0)
    return NETWORKS.build("classifier", num_classes=num_classes, backbone=backbone, backbone_args=backbone_args)


class Setup:
    """One level's model, optimizer and Amp on ``device``."""

    def __init__(
        self, level: str, model: nn.Module, device: torch.device, dtype: str = "bfloat16", backend: str = "auto"
    ) -> None:
        model = model.to(device)
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
        self.amp = Amp(AmpConfig(opt_level=level, dtype=dtype, backend=backend), device)
        self.model, self.optimizer = self.amp.initialize(model, optimizer)
        self.model.train()
        self.param_ptrs = {p.data_ptr() for p in self.model.parameters()}
        self.param_shapes = {tuple(p.shape) for p in self.model.parameters()}

    def loss(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        with self.amp.autocast():
            return nn.functional.cross_entropy(self.model(x), y)

    def step(self, x: torch.Tensor, y: torch.Tensor) -> None:
        self.amp.backward(self.loss(x, y))
        self.amp.step(self.optimizer)
        self.amp.zero_grad(self.optimizer)

    def saved_bytes(self, x: torch.Tensor, y: torch.Tensor) -> Tuple[int, int]:
        """Bytes autograd keeps for backward in one forward, each storage once: (activations, parameter-shaped).

        The parameters themselves are not counted; tensors shaped like a
        parameter are the low-precision weight copies autocast makes (O1).
        """
        seen: Dict[Tuple[int, int], Tuple[int, bool]] = {}

        def pack(t: torch.Tensor) -> torch.Tensor:
            storage = t.untyped_storage()
            if storage.data_ptr() not in self.param_ptrs:
                seen[(storage.data_ptr(), storage.nbytes())] = (storage.nbytes(), tuple(t.shape) in self.param_shapes)
            return t

        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            loss = self.loss(x, y)
        del loss
        weights = sum(n for n, is_weight in seen.values() if is_weight)
        return sum(n for n, _ in seen.values()) - weights, weights


def run(quick: bool = False) -> List[Dict[str, object]]:
    """O1 and O2 (bf16) against O0: per-round step-time ratios and saved-activation ratios."""
    batch, size, repeats, steps = (4, 32, 2, 1) if quick else (32, 64, 5, 3)
    g = torch.Generator().manual_seed(0)
    x, y = torch.randn(batch, 3, size, size, generator=g), torch.randint(0, 10, (batch,), generator=g)
    setups = {level: Setup(level, classifier("resnet18", 10), torch.device("cpu")) for level in LEVELS}
    for setup in setups.values():  # warm-up: allocator, autocast caches, optimizer state
        setup.step(x, y)
    times: Dict[str, List[float]] = {level: [] for level in LEVELS}
    for _ in range(repeats):
        for level, setup in setups.items():
            start = time.perf_counter()
            for _ in range(steps):
                setup.step(x, y)
            times[level].append((time.perf_counter() - start) / steps)
    memory = {level: setup.saved_bytes(x, y) for level, setup in setups.items()}
    model = f"resnet18 {size}x{size} batch {batch}, AdamW"
    rows = []
    for level in LEVELS[1:]:
        rows.append(
            row(
                "4 amp on CPU",
                f"step time {level} bf16 / O0 fp32",
                ratios(times[level], times["O0"]),
                note=f"{model}; O0 step {statistics.median(times['O0']) * 1e3:.0f} ms",
            )
        )
        rows.append(
            row(
                "4 amp on CPU",
                f"bytes saved for backward {level} / O0",
                [memory[level][0] / memory["O0"][0]],
                note=f"O0 {memory['O0'][0] / 2**20:.1f} MiB; {level} also keeps {memory[level][1] / 2**20:.1f} MiB of weight copies",
            )
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="small batch and input, 2 repeats (a smoke run)")
    parser.add_argument("--threads", type=int, default=None, help="torch intra-op threads")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    for r in run(args.quick):
        print(f"{r['measure']:<40} {r['value']:>7}  [{r['spread']}]  {r['note']}")


if __name__ == "__main__":
    main()
