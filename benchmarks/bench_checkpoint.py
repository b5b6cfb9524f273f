"""Gradient checkpointing on a deep network: memory for backward, step time, gradients.

Memory is measured two ways: bytes of the tensors autograd keeps for backward
(counted once per storage with ``torch.autograd.graph.saved_tensors_hooks``),
and the peak resident memory of a fresh process running one training step,
above its resident memory just before the step.
"""

from __future__ import annotations

import copy
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Dict, List

import torch
from torch import nn

from backbone.base import Backbone
from benchmarks.common import interleaved, ratios, row, timed
from module.conv import ConvBNAct

ROOT = Path(__file__).resolve().parents[1]
DEPTH, BLOCKS, WIDTH, BATCH, SIZE = 8, 4, 32, 32, 16  # sqrt(2 x 32 blocks) = 8 checkpointed stages


class DeepNet(Backbone):
    """``DEPTH`` stages of ``BLOCKS`` conv-bn-relu blocks at one resolution (activations dominate memory)."""

    def __init__(self, depth: int = DEPTH, blocks: int = BLOCKS, width: int = WIDTH) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, width, 3, padding=1)
        for _ in range(depth):
            self.stages.append(nn.Sequential(*(ConvBNAct(width, width) for _ in range(blocks))))
        self.head = nn.Linear(width, 10)
        self.out_channels, self.strides = [width] * depth, [1] * depth

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        return self.head(super().forward(self.stem(x))[-1].mean(dim=(2, 3)))


def _models():
    torch.manual_seed(0)
    plain = DeepNet()
    ckpt = copy.deepcopy(plain)
    ckpt.set_grad_checkpointing(True)
    return plain, ckpt


def _data():
    g = torch.Generator().manual_seed(0)
    return torch.randn(BATCH, 3, SIZE, SIZE, generator=g), torch.randint(0, 10, (BATCH,), generator=g)


def _step(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> None:
    model.zero_grad(set_to_none=True)
    nn.functional.cross_entropy(model(x), y).backward()


def saved_bytes(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> int:
    """Bytes of the distinct storages autograd saves for backward during one forward."""
    storages: Dict[int, int] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        storages[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        loss = nn.functional.cross_entropy(model(x), y)
    loss.backward()
    return sum(storages.values())


def _status_kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"/proc/self/status has no {field}; the peak-memory probe needs Linux")


def child(mode: str) -> None:
    """In a fresh process: peak resident memory of one training step above the memory before it."""
    torch.set_num_threads(1)
    plain, ckpt = _models()
    model = ckpt if mode == "ckpt" else plain
    x, y = _data()
    _step(model, x[:1], y[:1])  # load kernels and libraries first, with 1/BATCH of the activations
    before = _status_kib("VmRSS")
    _step(model, x, y)
    # VmHWM is this address space's peak; ru_maxrss would also count the parent's size inherited at fork.
    peak = _status_kib("VmHWM")
    print(json.dumps({"step_kib": peak - before}))


def peak_step_kib(mode: str) -> float:
    """Run ``child(mode)`` in a fresh interpreter. A fixed mmap threshold makes glibc return freed
    tensors to the system, so resident memory follows live tensors instead of the heap's high-water mark."""
    out = subprocess.run(
        [sys.executable, "-m", "benchmarks.bench_checkpoint", mode],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "OMP_NUM_THREADS": "1", "MALLOC_MMAP_THRESHOLD_": "65536"},
    )
    if out.returncode != 0:
        raise RuntimeError(f"memory probe failed: {out.stderr[-2000:]}")
    return float(json.loads(out.stdout.strip().splitlines()[-1])["step_kib"])


def run(quick: bool = False) -> List[dict]:
    rounds, rss_rounds = (2, 1) if quick else (4, 2)
    plain, ckpt = _models()
    x, y = _data()
    # Gradients of one step from the same weights.
    _step(plain, x, y), _step(ckpt, x, y)
    grad_diff = max(float((p.grad - q.grad).abs().max()) for p, q in zip(plain.parameters(), ckpt.parameters()))
    grads_close = all(
        torch.allclose(p.grad, q.grad, rtol=1e-4, atol=1e-5) for p, q in zip(plain.parameters(), ckpt.parameters())
    )
    bytes_ratio = saved_bytes(ckpt, x, y) / saved_bytes(plain, x, y)
    plain_mib = saved_bytes(plain, x, y) / 2**20
    times = interleaved(
        {"plain": lambda: timed(lambda: _step(plain, x, y)), "ckpt": lambda: timed(lambda: _step(ckpt, x, y))}, rounds
    )
    rss = interleaved(
        {"plain": lambda: peak_step_kib("plain"), "ckpt": lambda: peak_step_kib("ckpt")}, rss_rounds, warmup=False
    )
    net = f"{DEPTH} stages x {BLOCKS} conv-bn-relu, width {WIDTH}, batch {BATCH} at {SIZE}x{SIZE}"
    return [
        row(
            "3 grad checkpointing",
            "bytes saved for backward, ckpt / plain",
            [bytes_ratio],
            "<= 0.40",
            lambda m: m <= 0.40,
            f"{net}; plain {plain_mib:.1f} MiB",
        ),
        row(
            "3 grad checkpointing",
            "peak RSS of a step (fresh process), ckpt / plain",
            ratios(rss["ckpt"], rss["plain"]),
            "<= 0.40",
            lambda m: m <= 0.40,
            f"plain step {statistics.median(rss['plain']) / 1024:.1f} MiB above the RSS before it",
        ),
        row(
            "3 grad checkpointing",
            "step time ckpt / plain",
            ratios(times["ckpt"], times["plain"]),
            "<= 1.4",
            lambda m: m <= 1.4,
            "one recomputed forward per stage",
        ),
        row(
            "3 grad checkpointing",
            "max abs grad diff ckpt vs plain",
            [grad_diff],
            "allclose",
            lambda m: grads_close,
            "rtol 1e-4, atol 1e-5",
            fmt="{:.1e}",
        ),
    ]


if __name__ == "__main__":
    child(sys.argv[1])
