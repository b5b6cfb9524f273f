"""Process-group set-up and teardown, rank helpers, reductions, replica checks.

The launchers (``torchrun``, ``python -m torch.distributed.launch``) describe the
job in environment variables (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR/PORT);
without them the run is a single process and every helper here degrades to a
no-op, so the training code is written once for both.
"""

from __future__ import annotations

import datetime
import hashlib
import logging
import os
import random
import sys
from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, NoReturn, Optional, Tuple

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


def _restart_store(rank: int, world_size: int, timeout: datetime.timedelta) -> Dict[str, Any]:
    """After a ``torchrun --max-restarts`` restart, the launcher's store under a per-attempt prefix.

    The restarted workers join through the same store as the failed attempt, whose
    keys (the gloo addresses of the dead processes among them) are still there; a
    new worker could read one and fail with "connection refused".
    """
    attempt = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
    if attempt == 0:
        return {}
    from torch.distributed.rendezvous import rendezvous

    store, _, _ = next(rendezvous("env://", rank, world_size, timeout=timeout))
    return {"store": dist.PrefixStore(f"restart{attempt}/", store), "rank": rank, "world_size": world_size}


def init_distributed(device: str = "auto", backend: str = "auto", timeout_s: int = 1800) -> DistInfo:
    """Join the process group the launcher described, or run as one process."""
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    dev = resolve_device(device, local_rank)
    if world_size > 1 and not dist.is_initialized():
        if backend == "auto":
            backend = "nccl" if dev.type == "cuda" else "gloo"
        timeout = datetime.timedelta(seconds=timeout_s)
        dist.init_process_group(
            backend=backend,
            timeout=timeout,
            **_restart_store(rank, world_size, timeout),
            **({"device_id": dev} if dev.type == "cuda" else {}),
        )
        log.info("process group: backend=%s rank=%d/%d local_rank=%d device=%s", backend, rank, world_size, local_rank, dev)
    return DistInfo(rank=rank, world_size=world_size, local_rank=local_rank, device=dev)


def cleanup() -> None:
    """Leave the process group after a run that went well (safe to call when none exists)."""
    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()


def exit_now(code: int, err: Optional[BaseException] = None) -> NoReturn:
    """End this rank at once after a failure in a distributed run (call it in an ``except`` block).

    A rank that fails must not wait for its peers: ``destroy_process_group``,
    a pending collective or interpreter shutdown (joining loader threads) can
    block on ranks that are themselves blocked on this one. The launcher sees
    the exit code and stops the other ranks; ``err`` goes to torchrun's error
    file, so its summary names the root cause.
    """
    if err is not None:
        try:
            from torch.distributed.elastic.multiprocessing.errors import get_error_handler

            get_error_handler().record_exception(err)
        except Exception:  # the report is a courtesy; exiting is what matters
            pass
    for handler in logging.getLogger().handlers:
        handler.flush()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


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


def _agreed_layout(sums: Dict[str, torch.Tensor]) -> Dict[str, Tuple[int, ...]]:
    """The union of every rank's keys and shapes: a rank whose shard was empty has none."""
    layout: Dict[str, Tuple[int, ...]] = {}
    for theirs in all_gather_objects({k: tuple(v.shape) for k, v in sums.items()}):
        for key, shape in theirs.items():
            if layout.setdefault(key, shape) != shape:
                raise ValueError(f"sum '{key}' has shape {shape} on one rank and {layout[key]} on another; metric sums must have a fixed shape")
    return layout


def all_reduce_sums(sums: Dict[str, torch.Tensor]) -> Dict[str, torch.Tensor]:
    """Sum a dict of tensors over ranks (float64 keeps counts exact); keys missing on a
    rank count as zeros there, so a rank that evaluated nothing still takes part."""
    if not is_dist():
        return sums
    layout = _agreed_layout(sums)
    if not layout:
        return {}
    keys = sorted(layout)
    shapes = [layout[k] for k in keys]
    # gloo reduces CPU tensors, nccl CUDA ones: reduce where the backend wants them.
    device = torch.device("cuda", torch.cuda.current_device()) if dist.get_backend() == "nccl" else torch.device("cpu")
    parts = [sums[k].detach() if k in sums else torch.zeros(shape) for k, shape in zip(keys, shapes)]
    flat = torch.cat([p.to(device, torch.float64).reshape(-1) for p in parts])
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


def broadcast_buffers(model: torch.nn.Module, src: int = 0) -> None:
    """Copy rank ``src``'s buffers (BatchNorm running statistics) to every rank.

    DDP broadcasts buffers before each training forward, but each rank's last
    step then updates its own copy from its own batch; evaluation and the
    checkpoint must see one set.
    """
    if not is_dist():
        return
    groups: Dict[Tuple[torch.device, torch.dtype], List[torch.Tensor]] = {}
    for buf in unwrap(model).buffers():
        groups.setdefault((buf.device, buf.dtype), []).append(buf)
    for bufs in groups.values():  # one collective per dtype, not per buffer
        flat = torch.cat([b.detach().reshape(-1) for b in bufs])
        dist.broadcast(flat, src=src)
        offset = 0
        for b in bufs:
            b.data.copy_(flat[offset : offset + b.numel()].view_as(b))
            offset += b.numel()


def state_checksum(state: Mapping[str, torch.Tensor]) -> str:
    """sha256 over the names and raw bytes of a state_dict's tensors."""
    digest = hashlib.sha256()
    for name in sorted(state):
        tensor = state[name]
        digest.update(name.encode())
        if isinstance(tensor, torch.Tensor):
            digest.update(str(tensor.dtype).encode())
            digest.update(tensor.detach().cpu().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()


def check_replicas(model: torch.nn.Module) -> bool:
    """Whether every rank holds bit-identical weights and buffers (logged either way).

    DDP keeps replicas in step by construction; a difference means something in
    the step ran per rank (an unsynchronized buffer, a rank-dependent branch).
    """
    if not is_dist():
        return True
    digests = all_gather_objects(state_checksum(unwrap(model).state_dict()))
    if len(set(digests)) == 1:
        log.info("replicas identical on %d rank(s): sha256 %s", len(digests), digests[0])
        return True
    log.error("replicas differ across ranks (sha256 per rank: %s)", ", ".join(d[:12] for d in digests))
    return False


def any_rank(flag: bool) -> bool:
    """True on every rank when ``flag`` is true on at least one (a one-number all-reduce)."""
    if not is_dist():
        return bool(flag)
    device = torch.device("cuda", torch.cuda.current_device()) if dist.get_backend() == "nccl" else torch.device("cpu")
    value = torch.tensor([1.0 if flag else 0.0], device=device)
    dist.all_reduce(value, op=dist.ReduceOp.MAX)
    return bool(value.item())
