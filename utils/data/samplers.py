"""Samplers: a padding-free shard sampler for exact distributed evaluation, a resumable training sampler."""

from __future__ import annotations

import itertools
from typing import Any, Dict, Iterator, Optional

import torch
from torch.utils.data import DistributedSampler, Sampler


class ShardSampler(Sampler[int]):
    """Rank ``r`` of ``w`` takes indices r, r+w, r+2w, ...: disjoint shards, no repeats.

    ``DistributedSampler`` pads the dataset by repeating samples so that every rank
    gets the same count; summing metrics over its shards counts those samples twice.
    Here shard sizes may differ by one, and the union is exactly the dataset.
    """

    def __init__(self, length: int, rank: int = 0, world_size: int = 1) -> None:
        if not 0 <= rank < world_size:
            raise ValueError(f"rank {rank} is outside world size {world_size}")
        self.length = length
        self.rank = rank
        self.world_size = world_size

    def __iter__(self) -> Iterator[int]:
        return iter(range(self.rank, self.length, self.world_size))

    def __len__(self) -> int:
        return len(range(self.rank, self.length, self.world_size))


class ResumableSampler(DistributedSampler):
    """``DistributedSampler`` that can start an epoch after its first ``skip`` indices.

    The order of an epoch depends only on (seed, epoch), so skipping the indices
    of the batches a checkpoint had consumed continues that epoch exactly; the
    skipped samples are never loaded. ``set_epoch`` clears the skip, and also
    reseeds ``generator`` (the DataLoader's, which seeds its workers) from
    (seed, epoch, rank): the global torch generator is then not drawn from when
    an epoch's iterator starts, so its stream is the same with or without a resume.
    """

    def __init__(self, dataset: Any, num_replicas: int, rank: int, seed: int, generator: Optional[torch.Generator] = None) -> None:
        super().__init__(dataset, num_replicas=num_replicas, rank=rank, shuffle=True, seed=seed)
        self.skip = 0
        self.generator = generator

    def set_epoch(self, epoch: int) -> None:
        super().set_epoch(epoch)
        self.skip = 0
        if self.generator is not None:
            self.generator.manual_seed((self.seed * 1_000_003 + epoch) * 1_009 + self.rank)

    def skip_first(self, count: int) -> None:
        """Leave out the first ``count`` indices of the current epoch (call after ``set_epoch``)."""
        self.skip = max(int(count), 0)

    def __iter__(self) -> Iterator[int]:
        return itertools.islice(super().__iter__(), self.skip, None)

    def __len__(self) -> int:
        return max(self.num_samples - self.skip, 0)

    def state_dict(self) -> Dict[str, int]:
        return {"epoch": self.epoch, "seed": self.seed, "num_replicas": self.num_replicas, "rank": self.rank}
