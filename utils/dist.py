"""Process-group set-up, rank helpers and reductions.

The launchers (``torchrun``, ``python -m torch.distributed.launch``) describe the
job in environment variables (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR/PORT);
without them the run is a single process and every helper here degrades to a
no-op, so the training code is written once for both.
"""

from __future__ import annotations

import datetime
import logging
import os
import random
from dataclasses import dataclass
from typing import Any, Dict, List

import numpy as np
import torch
import torch.distributed as dist

log = logging.getLogger(__name__)


@dataclass
class DistInfo:
    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    device: torch.device = torch.device("cpu")

    @property
    def distributed(self) -> bool:
        return self.world_size > 1

    @property
    def is_main(self) -> bool:
        return self.rank == 0


def resolve_device(device: str, local_rank: int = 0) -> torch.device:
    """``auto`` picks the GPU of this local rank when CUDA is available, else the CPU."""
    if device == "cuda" or (device == "auto" and torch.cuda.is_available()):
        if not torch.cuda.is_available():
            raise RuntimeError("config device=cuda but CUDA is not available; use device=cpu or device=auto")
        torch.cuda.set_device(local_rank)
        return torch.device("cuda", local_rank)
    return torch.device("cpu")


def init_distributed(device: str = "auto", backend: str = "auto", timeout_s: int = 1800) -> DistInfo:
    """Join the process group the launcher described, or run as one process."""
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    dev = resolve_device(device, local_rank)
    if world_size > 1 and not dist.is_initialized():
        if backend == "auto":
            backend = "nccl" if dev.type == "cuda" else "gloo"
        dist.init_process_group(
            backend=backend,
            timeout=datetime.timedelta(seconds=timeout_s),
            **({"device_id": dev} if dev.type == "cuda" else {}),
        )
        log.info("process group: backend=%s rank=%d/%d local_rank=%d device=%s", backend, rank, world_size, local_rank, dev)
    return DistInfo(rank=rank, world_size=world_size, local_rank=local_rank, device=dev)


def cleanup() -> None:
    """Leave the process group (safe to call when none exists)."""
    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()


def is_dist() -> bool:
    return dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1


def get_rank() -> int:
    return dist.get_rank() if is_dist() else 0


def get_world_size() -> int:
    return dist.get_world_size() if is_dist() else 1


def is_main() -> bool:
    return get_rank() == 0


def barrier() -> None:
    if is_dist():
        dist.barrier()


def seed_everything(seed: int, rank: int = 0) -> None:
    """Seed python, numpy and torch; each rank gets its own stream (seed + rank)."""
    value = seed + rank
    random.seed(value)
    np.random.seed(value % 2**32)
    torch.manual_seed(value)


def all_reduce_sums(sums: Dict[str, torch.Tensor]) -> Dict[str, torch.Tensor]:
    """Sum a dict of tensors over ranks in one collective (float64 keeps counts exact)."""
    if not is_dist() or not sums:
        return sums
    keys = sorted(sums)
    shapes = [sums[k].shape for k in keys]
    # gloo reduces CPU tensors, nccl CUDA ones: reduce where the backend wants them.
    device = torch.device("cuda", torch.cuda.current_device()) if dist.get_backend() == "nccl" else torch.device("cpu")
    flat = torch.cat([sums[k].detach().to(device, torch.float64).reshape(-1) for k in keys])
    dist.all_reduce(flat, op=dist.ReduceOp.SUM)
    out, offset = {}, 0
    for key, shape in zip(keys, shapes):
        n = int(np.prod(shape)) if len(shape) else 1
        out[key] = flat[offset : offset + n].reshape(shape).cpu()
        offset += n
    return out


def all_gather_objects(obj: Any) -> List[Any]:
    """Every rank's ``obj``, in rank order (a one-item list without a process group)."""
    if not is_dist():
        return [obj]
    out: List[Any] = [None] * get_world_size()
    dist.all_gather_object(out, obj)
    return out


def broadcast_object(obj: Any, src: int = 0) -> Any:
    """Rank ``src``'s ``obj`` on every rank."""
    if not is_dist():
        return obj
    box = [obj]
    dist.broadcast_object_list(box, src=src)
    return box[0]


def unwrap(model: torch.nn.Module) -> torch.nn.Module:
    """The network inside DDP / DataParallel wrappers."""
    wrappers = (torch.nn.parallel.DistributedDataParallel, torch.nn.DataParallel)
    while isinstance(model, wrappers) or type(model).__module__.startswith("apex."):
        model = model.module
    return model
