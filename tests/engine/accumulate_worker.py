"""Run under torchrun: K accumulated micro-batches per rank with DDP; rank 0 saves the result.

``python -m torch.distributed.run --standalone --nproc_per_node=2 tests/engine/accumulate_worker.py OUT``
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from torch import nn  # noqa: E402

WORLD, K, B, STEPS = 2, 3, 4, 2


def make_model() -> nn.Module:
    """No BatchNorm: per-sample losses are independent, so batch splitting cannot change the update."""
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 3))


def make_data() -> tuple:
    g = torch.Generator().manual_seed(1)
    n = WORLD * K * B * STEPS
    return torch.randn(n, 6, generator=g), torch.randint(0, 3, (n,), generator=g)


def rank_micro_batches(rank: int) -> list:
    """Step s uses the global slice [s*W*K*B, (s+1)*W*K*B); rank r takes micro-batches r*K .. r*K+K-1 of it."""
    x, y = make_data()
    out = []
    for s in range(STEPS):
        for j in range(K):
            start = (s * WORLD * K + rank * K + j) * B
            out.append((x[start : start + B], y[start : start + B]))
    return out


def main(out: str) -> None:
    import torch.distributed as dist
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

    from utils.amp import Amp
    from utils.config import AmpConfig
    from utils.distributed.process_group import import_before_process_group
    from utils.engine.components import LoopOptions, Parts
    from utils.engine.trainer import Trainer

    torch.set_num_threads(1)
    import_before_process_group()  # see there: an abort at exit otherwise, now and then
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    model = nn.parallel.DistributedDataParallel(make_model())
    calls = []

    def counting_allreduce(state, bucket):
        calls.append(bucket.index())
        return default_hooks.allreduce_hook(None, bucket)

    model.register_comm_hook(None, counting_allreduce)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5, momentum=0.9)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda it: 1.0)
    batches = rank_micro_batches(rank)
    parts = Parts(model, nn.CrossEntropyLoss(), Amp(AmpConfig(), torch.device("cpu")), optimizer, scheduler, train_loader=batches)
    trainer = Trainer(parts, LoopOptions(accumulate=K))
    trainer.fit()
    if rank == 0:
        torch.save({"state": model.module.state_dict(), "allreduce_calls": len(calls), "steps": trainer.state.step}, out)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1])
