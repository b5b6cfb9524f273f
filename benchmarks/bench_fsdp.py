"""FSDP2 (``dist.mode=fsdp``): the framework's sharded step vs a hand-written FSDP2 loop, and per-rank memory vs DDP.

Two real processes (gloo over TCP, started with torch.multiprocessing) train a 21M-parameter
network (5 blocks of a 2048-wide linear layer, one classifier) with AdamW:

- the framework: ``shard_model`` (``fully_shard`` on each block, then the root) and the
  Trainer with its per-step hooks; the hand-written loop: the same ``fully_shard`` calls,
  zero_grad, forward, backward, step. Samples/s framework / hand, interleaved rounds, and
  the gathered weights of both after the same steps (goal: identical);
- the bytes each rank holds between steps for parameters, gradients and AdamW state, FSDP
  vs DDP on the same network (goal <= 0.6x: each rank keeps half of each).
"""

from __future__ import annotations

import time
from typing import Dict, List

import torch
import torch.distributed as dist
from torch import nn

from benchmarks.common import batches, hand_loop, in_processes, max_abs_diff, ratios, row

TIMEOUT_S = 420
WIDTH = 2048
BLOCKS = 5
GLOBAL_BATCH = 32


class Blocks(nn.Module):
    """Wide linear blocks and a classifier; ``fsdp_blocks`` names the units the framework shards."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.blocks = nn.ModuleList(nn.Sequential(nn.Linear(WIDTH, WIDTH), nn.ReLU()) for _ in range(BLOCKS))
        self.head = nn.Linear(WIDTH, 10)

    def fsdp_blocks(self) -> List[nn.Module]:
        return [*self.blocks, self.head]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            x = block(x)
        return self.head(x)


def _local_bytes(tensors) -> int:
    """Bytes this rank holds of ``tensors`` (a DTensor's local shard only)."""
    return sum((t.to_local() if hasattr(t, "to_local") else t).nbytes for t in tensors if t is not None)


def held_bytes(model: nn.Module, optimizer: torch.optim.Optimizer) -> int:
    """Parameters, one gradient per parameter (each exists through the backward; the loops set them
    to None at different points) and the optimizer's tensors, as this rank holds them."""
    params = list(model.parameters())
    states = [v for state in optimizer.state.values() for v in state.values() if torch.is_tensor(v) and v.dim() > 0]
    return 2 * _local_bytes(params) + _local_bytes(states)


def _framework(data: List) -> tuple:
    from benchmarks.common import framework_epoch
    from utils.config.load import load_config
    from utils.distributed.fsdp import shard_model

    cfg = load_config(overrides=["dist.mode=fsdp"])
    model = shard_model(Blocks(), cfg, None, distributed=True)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda it: 1.0)
    dist.barrier()
    start = time.perf_counter()
    framework_epoch(model, data, optimizer, scheduler, nn.functional.cross_entropy)
    dist.barrier()  # the slower rank's time counts
    return time.perf_counter() - start, model, optimizer


def _hand(data: List) -> tuple:
    from torch.distributed.fsdp import fully_shard

    model = Blocks()
    for block in model.fsdp_blocks():
        fully_shard(block)
    fully_shard(model)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    dist.barrier()
    start = time.perf_counter()
    hand_loop(model, data, optimizer)
    dist.barrier()
    return time.perf_counter() - start, model, optimizer


def _ddp_bytes(data: List) -> int:
    model = nn.parallel.DistributedDataParallel(Blocks())
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    inputs, targets = data[0]
    nn.functional.cross_entropy(model(inputs), targets).backward()
    optimizer.step()
    return held_bytes(model, optimizer)


def _full(model: nn.Module) -> Dict[str, torch.Tensor]:
    return {
        k: (v.full_tensor() if hasattr(v, "full_tensor") else v).detach().clone() for k, v in model.state_dict().items()
    }


def _figures(rank: int, world: int, steps: int, rounds: int) -> dict:
    """This rank's part of the measurement, in the process group; rank 0's figures are the result."""
    half = GLOBAL_BATCH // world
    local = [
        (x[rank * half : (rank + 1) * half], y[rank * half : (rank + 1) * half])
        for x, y in batches(steps, GLOBAL_BATCH, (WIDTH,))
    ]
    _framework(local[:2]), _hand(local[:2])  # warm-up
    times: Dict[str, List[float]] = {"framework": [], "hand": []}
    diffs, sharded = [], 0
    for r in range(rounds):  # interleaved, the order alternating
        order = (_framework, _hand) if r % 2 == 0 else (_hand, _framework)
        done = {fn.__name__.strip("_"): fn(local) for fn in order}
        for name, (seconds, _, _) in done.items():
            times[name].append(seconds)
        diffs.append(max_abs_diff(_full(done["framework"][1]), _full(done["hand"][1])))
        sharded = held_bytes(*done["framework"][1:])
    replicated = _ddp_bytes(local)
    params = sum(p.numel() for p in Blocks().parameters())
    return {"times": times, "diffs": diffs, "sharded": sharded, "replicated": replicated, "params": params}


def measure(steps: int, rounds: int, world: int = 2) -> dict:
    """Start ``world`` processes, wait at most TIMEOUT_S, return rank 0's figures."""
    return in_processes(_figures, world, (steps, rounds), TIMEOUT_S, "FSDP benchmark")


def run(quick: bool = False) -> List[dict]:
    steps, rounds = (3, 1) if quick else (10, 5)
    out = measure(steps, rounds)
    millions = out["params"] / 1e6
    return [
        row(
            "14 FSDP2",
            "samples/s framework 2-rank FSDP step / hand-written FSDP2 loop",
            ratios(out["times"]["hand"], out["times"]["framework"]),
            ">= 0.97",
            lambda m: m >= 0.97,
            f"gloo, {GLOBAL_BATCH // 2} per rank, {steps} AdamW steps per round, {millions:.1f}M parameters in {BLOCKS + 1} sharded blocks",
        ),
        row(
            "14 FSDP2",
            f"max abs weight diff framework vs hand FSDP2, {steps} steps",
            [max(out["diffs"])],
            "0",
            lambda m: m == 0.0,
            "same init, batches and optimizer; gathered full weights",
            fmt="{:.1e}",
        ),
        row(
            "14 FSDP2",
            "bytes per rank of parameters + gradients + AdamW state, FSDP / DDP",
            [out["sharded"] / out["replicated"]],
            "<= 0.6",
            lambda m: m <= 0.6,
            f"2 ranks, {millions:.1f}M parameters; DDP {out['replicated'] / 2**20:.0f} MiB per rank, FSDP {out['sharded'] / 2**20:.0f} MiB",
        ),
    ]


if __name__ == "__main__":
    for line in run():
        print(line)
