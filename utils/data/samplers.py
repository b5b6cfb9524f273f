"""Samplers: a padding-free shard sampler for exact distributed evaluation, resumable training samplers.

A training epoch's order is ``epoch_permutation``: a function of the seed and the epoch alone, either
a shuffle of the whole split or, for a dataset that gives a :class:`WindowOrder` (packed shards with
``data.args.shuffle_window``), shards in a seeded order and samples shuffled within each window of
consecutive shards. Either way the global batches, the resume and the world-size independence are
the same; the window only changes which samples are near each other in the epoch.
"""

from __future__ import annotations

import copy
import itertools
import math
from dataclasses import dataclass
from typing import Any, Iterator, List, Optional, Sequence

import torch
from torch.utils.data import DistributedSampler, Sampler


@dataclass(frozen=True)
class WindowOrder:
    """``groups``: the sample indices of each shard; ``window``: how many consecutive shards (in the epoch's
    shard order) have their samples shuffled together."""

    groups: Sequence[Sequence[int]]
    window: int


def epoch_permutation(length: int, seed: int, epoch: int, window: Optional[WindowOrder] = None) -> torch.Tensor:
    """The order of epoch ``epoch``: ``torch.randperm`` from ``seed + epoch`` (``DistributedSampler``'s own), or
    with ``window``: the shards permuted from the same generator, then each window's samples permuted."""
    generator = torch.Generator().manual_seed(seed + epoch)
    if window is None:
        return torch.randperm(length, generator=generator)
    shards = torch.randperm(len(window.groups), generator=generator).tolist()
    parts = []
    for start in range(0, len(shards), window.window):
        members = torch.tensor([i for shard in shards[start : start + window.window] for i in window.groups[shard]])
        parts.append(members[torch.randperm(len(members), generator=generator)])
    return torch.cat(parts)


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

    def __init__(
        self,
        dataset: Any,
        num_replicas: int,
        rank: int,
        seed: int,
        generator: Optional[torch.Generator] = None,
        window: Optional[WindowOrder] = None,
    ) -> None:
        super().__init__(dataset, num_replicas=num_replicas, rank=rank, shuffle=True, seed=seed)
        self.skip = 0
        self.generator = generator
        self.window = window

    def set_epoch(self, epoch: int) -> None:
        super().set_epoch(epoch)
        self.skip = 0
        if self.generator is not None:
            self.generator.manual_seed((self.seed * 1_000_003 + epoch) * 1_009 + self.rank)

    def skip_first(self, count: int) -> None:
        """Leave out the first ``count`` indices of the current epoch (call after ``set_epoch``)."""
        self.skip = max(int(count), 0)

    def _all(self) -> Iterator[int]:
        """This rank's indices of the epoch: ``DistributedSampler``'s, over ``epoch_permutation``'s order."""
        if self.window is None:
            return DistributedSampler.__iter__(self)
        indices = epoch_permutation(len(self.dataset), self.seed, self.epoch, self.window).tolist()
        padding = self.total_size - len(indices)  # as DistributedSampler pads (drop_last=False)
        indices += (indices * math.ceil(padding / len(indices)))[:padding]
        return iter(indices[self.rank : self.total_size : self.num_replicas])

    def __iter__(self) -> Iterator[int]:
        return itertools.islice(self._all(), self.skip, None)

    def order_of(self, epoch: int, rank: int) -> List[int]:
        """Rank ``rank``'s indices of epoch ``epoch``, all of them (no skip), this sampler left as it is."""
        other = copy.copy(self)
        other.generator, other.rank = None, rank  # the loader's generator is not reseeded for another rank
        other.set_epoch(epoch)
        return list(other._all())

    def __len__(self) -> int:
        return max(self.num_samples - self.skip, 0)


class GlobalBatchSampler(Sampler[int]):
    """The training order of ``data.global_batch_size``: the same global batches at every world size.

    An epoch's order is one permutation of the dataset drawn from (seed, epoch),
    cut into global batches of ``global_batch`` samples (the last, incomplete one
    is left out, so every step sees a full global batch); rank ``r`` of ``w``
    takes the r-th slice of ``global_batch / w`` samples of each. Which samples a
    global batch holds therefore does not depend on the world size, and a run that
    consumed ``b`` global batches continues at any world size by skipping
    ``b * global_batch / w`` samples of its slice (``skip_first``).
    """

    def __init__(
        self,
        length: int,
        global_batch: int,
        rank: int,
        world_size: int,
        seed: int,
        generator: Optional[torch.Generator] = None,
        window: Optional[WindowOrder] = None,
    ) -> None:
        if global_batch % world_size:
            raise ValueError(f"global batch {global_batch} is not divisible by world size {world_size}")
        self.length, self.global_batch, self.rank, self.world_size, self.seed = (
            length,
            global_batch,
            rank,
            world_size,
            seed,
        )
        self.local_batch = global_batch // world_size
        self.generator = generator
        self.window = window
        self.epoch = 0
        self.skip = 0

    @property
    def batches(self) -> int:
        """Global batches per epoch."""
        return self.length // self.global_batch

    def set_epoch(self, epoch: int) -> None:
        """Select the epoch's permutation, clear the skip, reseed the loader's generator (as ``ResumableSampler``)."""
        self.epoch, self.skip = epoch, 0
        if self.generator is not None:
            self.generator.manual_seed((self.seed * 1_000_003 + epoch) * 1_009 + self.rank)

    def skip_first(self, count: int) -> None:
        """Leave out the first ``count`` indices of this rank's part of the current epoch (call after ``set_epoch``)."""
        self.skip = max(int(count), 0)

    def __iter__(self) -> Iterator[int]:
        return iter(self.order_of(self.epoch, self.rank)[self.skip :])

    def order_of(self, epoch: int, rank: int) -> List[int]:
        """Rank ``rank``'s indices of epoch ``epoch``, all of them (no skip): what any rank can compute for any other."""
        order = epoch_permutation(self.length, self.seed, epoch, self.window)
        start = rank * self.local_batch
        mine = order[: self.batches * self.global_batch].view(self.batches, self.global_batch)[
            :, start : start + self.local_batch
        ]
        return mine.reshape(-1).tolist()

    def __len__(self) -> int:
        return max(self.batches * self.local_batch - self.skip, 0)
