"""Samplers: a padding-free shard sampler for exact distributed evaluation."""

from __future__ import annotations

from typing import Iterator

from torch.utils.data import Sampler


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
