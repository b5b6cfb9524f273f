"""Replicas across ranks: one set of buffers for evaluation and checkpoints, and a check that weights agree."""

from __future__ import annotations

import hashlib
import logging
from typing import Dict, List, Mapping, Tuple

import torch
import torch.distributed as dist

from utils.distributed.fsdp import is_sharded
from utils.distributed.ops import all_gather_objects, is_dist
from utils.distributed.parallel import unwrap

log = logging.getLogger(__name__)


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
    if is_sharded(model):  # each rank holds other shards by design; buffers are broadcast before use
        return True
    digests = all_gather_objects(state_checksum(unwrap(model).state_dict()))
    if len(set(digests)) == 1:
        log.info("replicas identical on %d rank(s): sha256 %s", len(digests), digests[0])
        return True
    log.error("replicas differ across ranks (sha256 per rank: %s)", ", ".join(d[:12] for d in digests))
    return False
