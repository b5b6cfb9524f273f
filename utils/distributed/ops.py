"""Rank helpers and collectives that degrade to no-ops in a single process, so the training code is written once."""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Tuple, TypeVar

import numpy as np
import torch
import torch.distributed as dist

from utils.errors import UserError

T = TypeVar("T")


def is_dist() -> bool:
    return dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1


def get_rank() -> int:
    return dist.get_rank() if is_dist() else 0


def get_world_size() -> int:
    return dist.get_world_size() if is_dist() else 1


def barrier() -> None:
    if is_dist():
        dist.barrier()


def _agreed_layout(sums: Dict[str, torch.Tensor]) -> Dict[str, Tuple[int, ...]]:
    """The union of every rank's keys and shapes: a rank whose slice was empty has none."""
    layout: Dict[str, Tuple[int, ...]] = {}
    for theirs in all_gather_objects({k: tuple(v.shape) for k, v in sums.items()}):
        for key, shape in theirs.items():
            if layout.setdefault(key, shape) != shape:
                raise ValueError(
                    f"sum '{key}' has shape {shape} on one rank and {layout[key]} on another; metric sums must have a fixed shape"
                )
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
    device = _backend_device()
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


def decided_by_rank0(decide: Callable[[], T]) -> T:
    """``decide()`` run on rank 0 alone, its answer on every rank; bad input found there (a
    ``UserError``) is raised on every rank, so no rank waits for an answer that never comes."""
    answer: Any = None
    if get_rank() == 0:
        try:
            answer = (decide(), None)
        except UserError as err:
            answer = (None, err)
    result, error = broadcast_object(answer)
    if error is not None:
        raise error
    return result


def _backend_device() -> torch.device:
    # gloo reduces CPU tensors, nccl CUDA ones
    return torch.device("cuda", torch.cuda.current_device()) if dist.get_backend() == "nccl" else torch.device("cpu")


def all_reduce_max(values: torch.Tensor) -> torch.Tensor:
    """The elementwise maximum of ``values`` over ranks, without reading it (on the backend's device)."""
    if not is_dist():
        return values
    values = values.to(_backend_device())
    dist.all_reduce(values, op=dist.ReduceOp.MAX)
    return values


def any_rank(flag: bool) -> bool:
    """True on every rank when ``flag`` is true on at least one (a one-number all-reduce)."""
    if not is_dist():
        return bool(flag)
    return bool(all_reduce_max(torch.tensor([1.0 if flag else 0.0])).item())
