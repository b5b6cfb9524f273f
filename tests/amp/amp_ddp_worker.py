"""Run by tests/amp/test_amp_train.py under torchrun: O2 with DDP, accumulation and clipping on 2 CPU processes."""

import contextlib
import sys

import torch
import torch.distributed as dist
from torch import nn

from utils.amp import Amp
from utils.config import AmpConfig
from utils.distributed.process_group import import_before_process_group
from utils.registry import NETWORKS


def check(dtype: str) -> None:
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = NETWORKS.build("classifier", num_classes=10, backbone="small_cnn", backbone_args={"widths": [8, 16]})
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    amp = Amp(AmpConfig(opt_level="O2", dtype=dtype), torch.device("cpu"))
    model, optimizer = amp.initialize(model, optimizer)
    ddp = nn.parallel.DistributedDataParallel(model)
    start = torch.cat([m.detach().flatten().clone() for _, m in amp.backend.masters.pairs])
    for step in range(4):
        for micro in range(2):  # each rank sees its own data; DDP syncs on the last micro-batch only
            g = torch.Generator().manual_seed(100 * rank + 10 * step + micro)
            x, y = torch.randn(8, 1, 8, 8, generator=g), torch.randint(0, 10, (8,), generator=g)
            with ddp.no_sync() if micro == 0 else contextlib.nullcontext():
                with amp.autocast():
                    loss = nn.functional.cross_entropy(ddp(x), y)
                amp.backward(loss / 2)
        amp.step(optimizer, clip_grad_norm=1.0)
        optimizer.zero_grad(set_to_none=True)
    masters = torch.cat([m.detach().flatten() for _, m in amp.backend.masters.pairs])
    params = torch.cat([p.detach().float().flatten() for p in model.parameters()])
    gathered = [torch.zeros_like(masters) for _ in range(2)], [torch.zeros_like(params) for _ in range(2)]
    dist.all_gather(gathered[0], masters)
    dist.all_gather(gathered[1], params)
    assert all(p.dtype == torch.float32 for g in optimizer.param_groups for p in g["params"])
    assert all(torch.equal(p, m.to(p.dtype)) for p, m in amp.backend.masters.pairs)
    if rank == 0:
        assert not torch.equal(masters, start), "the masters did not move"
        assert torch.equal(gathered[0][0], gathered[0][1]), "the ranks' fp32 masters differ"
        assert torch.equal(gathered[1][0], gathered[1][1]), "the ranks' model weights differ"
        print(f"{dtype}: ranks in sync", flush=True)


if __name__ == "__main__":
    torch.set_num_threads(1)
    import_before_process_group()  # see there: an abort at exit otherwise, now and then
    dist.init_process_group("gloo")
    for name in sys.argv[1:]:
        check(name)
    dist.destroy_process_group()
